"""The probe plugin: registers the six config_check items, the ``probe check`` command and the
``config_check`` config section.

Importing this module imports no framework; torch is touched only by the
weights/dataset/random checkers when a model or ``fmk="pytorch"`` is involved.
"""

from __future__ import annotations

from probe_core.api import CheckerSpec, CommandSpec, ConfigKey, ConfigSectionSpec, hookimpl

from probe_config_check import command, dataset, env, hyperparameters, packages, rng, weights


#: Negative priorities keep the built-in items first, in this order;
#: third-party checkers (priority 0) follow.
@hookimpl
def probe_checkers() -> list[CheckerSpec]:
    return [
        CheckerSpec("env", "environment variables that change numerics or communication (secrets redacted)",
                    env.collect, env.compare, priority=-60),
        CheckerSpec("pip", "versions of framework and training packages",
                    packages.collect, packages.compare, priority=-50),
        CheckerSpec("hyperparameters", "training arguments from scripts/configs (names normalised)",
                    hyperparameters.collect, hyperparameters.compare, priority=-40),
        CheckerSpec("weights", "per-parameter max/min/mean/norm per micro-step", weights.collect,
                    weights.compare, static=False, priority=-30),
        CheckerSpec("dataset", "statistics of the batches the model receives, per micro-step", dataset.collect,
                    dataset.compare, static=False, priority=-20),
        CheckerSpec("random", "RNG calls (count and call site) after ConfigChecker.apply_patches()",
                    rng.collect, rng.compare, static=False, prepare=rng.prepare, priority=-10),
    ]


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [command.CHECK_COMMAND]


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
