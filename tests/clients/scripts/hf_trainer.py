"""HF transformers Trainer: a tiny random BERT classifier, synthetic tokens, 2 updates, no downloads.

--plant: a callback switches layer 1's output LayerNorm to eps 1e-2 after the first update.
--float64: the model in float64 (the high-precision bench; its inputs are token ids).
"""
import argparse
import tempfile

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--plant", action="store_true")
parser.add_argument("--float64", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
config = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=32, num_labels=2)
model = BertForSequenceClassification(config)
if args.float64:
    model = model.double()  # Trainer keeps the model's dtype (its fp16/bf16 options only lower it)


class Tokens(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(1)
        self.ids = torch.randint(1, 64, (8, 12), generator=g)
        self.labels = torch.randint(0, 2, (8,), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(12, dtype=torch.long),
                "labels": self.labels[i]}


class Plant(TrainerCallback):
    def on_step_end(self, args, state, control, model=None, **kwargs):
        model.bert.encoder.layer[1].output.LayerNorm.eps = 1e-2


with tempfile.TemporaryDirectory() as out:
    training_args = TrainingArguments(output_dir=out, max_steps=2, per_device_train_batch_size=4, learning_rate=1e-3,
                                      logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, seed=0,
                                      dataloader_num_workers=0, disable_tqdm=True)
    trainer = Trainer(model=model, args=training_args, train_dataset=Tokens(),
                      callbacks=[Plant()] if args.plant else [])
    trainer.train()
