"""The probe plugin: registers the six config_check items, the ``probe check`` command and the
``config_check`` config section.

Importing this module imports no framework; torch is touched only by the
weights/dataset/random checkers when a model or ``fmk="pytorch"`` is involved.
"""

from __future__ import annotations

from probe_core.api import CheckerSpec, CommandSpec, ConfigKey, ConfigSectionSpec, Deferred, hookimpl


def _item(module: str) -> tuple[Deferred, Deferred]:
    """The checker module's ``collect`` and ``compare``, imported when a check runs."""
    return Deferred(f"probe_config_check.{module}:collect"), Deferred(f"probe_config_check.{module}:compare")


#: Negative priorities keep the built-in items first, in this order;
#: third-party checkers (priority 0) follow.
@hookimpl
def probe_checkers() -> list[CheckerSpec]:
    return [
        CheckerSpec("env", "environment variables that change numerics or communication (secrets redacted)",
                    *_item("env"), priority=-60),
        CheckerSpec("pip", "versions of framework and training packages",
                    *_item("packages"), priority=-50),
        CheckerSpec("hyperparameters", "training arguments from scripts/configs (names normalised)",
                    *_item("hyperparameters"), priority=-40),
        CheckerSpec("weights", "per-parameter max/min/mean/norm per micro-step", *_item("weights"), static=False, priority=-30),
        CheckerSpec("dataset", "statistics of the batches the model receives, per micro-step", *_item("dataset"), static=False, priority=-20),
        CheckerSpec("random", "RNG calls (count and call site) after ConfigChecker.apply_patches()",
                    *_item("rng"), static=False, prepare=Deferred("probe_config_check.rng:prepare"), priority=-10),
    ]


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [CommandSpec("check", "pack an environment's configuration, compare two packs or two checkpoints",
                        Deferred("probe_config_check.command:configure"), Deferred("probe_config_check.command:run"),
                        aliases=("config_check",))]


def _at_least_one(value: int) -> str | None:
    return None if value >= 1 else f"is {value}; record at least 1 step"


@hookimpl
def probe_config_sections() -> list[ConfigSectionSpec]:
    return [ConfigSectionSpec("config_check", (
        ConfigKey("env_prefixes", list, [], doc="extra environment variable prefixes to collect and compare"),
        ConfigKey("packages", list, [], doc="extra distributions whose versions are compared"),
        ConfigKey("hyperparameters_ignore", list, [], doc="regexes of hyperparameter names not to compare"),
        ConfigKey("steps", int, 5, check=_at_least_one,
                  doc="how many first forward calls (micro-steps) the weights and dataset checkers record"),
        ConfigKey("dataset_steps", int, 5, check=_at_least_one, doc="older name of steps"),
    ), description="config_check options")]
