"""probe config_check items: env, pip, hyperparameters, weights, dataset, random."""
