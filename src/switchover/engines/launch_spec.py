"""How an engine is launched, as cited data: each intent's flag (spelling, kind, meaning, the release range it holds
for, how its value maps to a shared meaning) and the launch syntax (command, model argument, images, config files,
the conversion step before a launch). Part of an engine profile (engines.profile); read by plan.launch and
plan.translate."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from switchover.engines.cited import CitedFact

__all__ = ["ConversionStep", "FlagKind", "FlagSpec", "ImageSpec", "InlineValues", "LaunchAlias", "LaunchSyntax"]


class _LaunchFact(CitedFact):
    source: str = Field(description="where it was read: a URL at a release, or file and line in the version read")
    verified: bool = Field(default=True, description="False when the fact was inferred, not read")
    note: str | None = None


FlagKind = Literal["int", "float", "str", "bool", "list", "json", "none"]


class FlagSpec(_LaunchFact):
    """One launch knob for an intent: how it is spelled and what it means in this engine."""

    flag: str | None = Field(description="primary CLI spelling; None = no CLI flag")
    aliases: list[str] = Field(default_factory=list)
    negation: str | None = Field(default=None, description="flag that turns a boolean off")
    kind: FlagKind = "str"
    default: Any = None
    yaml_key: str | None = Field(default=None, description="key in the engine's YAML config (TRT-LLM)")
    env: str | None = None
    unit: str | None = None
    choices: list[str] | None = None
    semantics: str | None = None
    invert: bool = Field(default=False, description="flag disables the intent (e.g. --disable-radix-cache)")
    equivalent: bool = Field(default=True, description="False: same intent, different meaning (not copied)")
    canonical: dict[str, str] | None = Field(default=None, description="engine value -> shared meaning")
    total_over_slots: bool = Field(default=False, description="value is shared by all slots (llama.cpp -c)")
    versions: str | None = Field(
        default=None,
        description="release range this spelling holds for ('<0.10.0'); None = every release the profile covers",
    )
    json_key: str | None = Field(
        default=None,
        description="the intent is this key of the JSON object `flag` takes "
        '(vLLM --speculative-config {"model": ...}); intents sharing a flag share one '
        "object; dotted for a nested key, '|' between spellings read (the first is written)",
    )
    separator: str | None = Field(
        default=None, description="a list given as one value joined by this (TGI --lora-adapters a,b)"
    )
    mapped_values_only: bool = Field(
        default=False,
        description="values cross to another engine only through "
        "`canonical` (parser names differ per engine): an unmapped value is lost, "
        "never copied",
    )
    default_means: str | None = Field(
        default=None,
        description="what leaving it unset means, as a canonical token "
        "('model': the model's own context or dtype), so a source value meaning the same "
        "needs no flag",
    )
    must_divide: str | None = Field(
        default=None,
        description="another intent this value must divide (SGLang: "
        "tp_size % ep_size == 0); the engine refuses to start otherwise",
    )
    rule_source: str | None = Field(default=None, description="where must_divide is enforced (URL at a release)")
    forms: list[Literal["file", "name", "text"]] | None = Field(
        default=None,
        description="what a value may be (a chat template: a file path, a built-in name, the text "
        "itself); None: anything",
    )
    kv_pairs: bool = Field(
        default=False,
        description="the mapping is given as KEY=VALUE pairs joined by commas "
        "(vLLM's --limit-mm-per-prompt before 0.8.5), not JSON",
    )
    named_items: bool = Field(
        default=False,
        description="each list item is NAME=PATH (vLLM --lora-modules): a bare PATH is named after itself",
    )
    on_value: str | None = Field(
        default=None,
        description="a boolean intent set by this value of the flag; any "
        "other value means off (TGI --cuda-graphs 0: no CUDA graphs)",
    )
    true_words: list[str] | None = Field(
        default=None,
        description="an environment variable's values (compared "
        "lowercased) the engine reads as on, the first is written; any other value "
        "is off (vLLM VLLM_USE_MODELSCOPE: only 'true' before 0.28.0)",
    )
    presence: bool = Field(
        default=False,
        description="set to any value at all, the variable turns the intent on "
        "(the engine only tests that it exists: SGLang SGLANG_USE_MODELSCOPE before 0.3.6.post2)",
    )
    one_way: bool = Field(
        default=False,
        description="with equivalent false: a value read from this engine means "
        "the shared intent (where the engine applies it) and carries over; a value for this engine "
        "is not given to it, since it does not always apply it (TGI --max-batch-size)",
    )

    @model_validator(mode="before")
    @classmethod
    def _newest_variant(cls, data: Any) -> Any:
        """An intent's list of variants read without a release (a raw profile) is its newest, the last listed: what
        load_profile keeps when no version is given (as for metrics)."""
        if isinstance(data, list) and data:
            return data[-1]
        return data

    def spellings(self) -> list[str]:
        """Every CLI spelling that sets this intent."""
        out = [self.flag] if self.flag else []
        return out + list(self.aliases)


class LaunchAlias(BaseModel):
    """Another command that starts the same server (e.g. a `python -m` entry point), and how it names the model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str
    model_arg: str


class ImageSpec(BaseModel):
    """A container image that runs the engine: what follows the image on `docker run`, and its tag's version."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repository: str = Field(description="image name without tag, registry included when it has one")
    args: Literal["engine", "command"] = Field(
        description="engine: the image's entrypoint is the server, words "
        "after the image are its arguments; command: they are a command"
    )
    version_tag: str | None = Field(default=None, description="regex whose group 1 is the engine version in the tag")
    tag_pattern: str | None = Field(
        default=None,
        description="regex a tag must match to be this engine's server "
        "image (llama.cpp's `server-*` tags; its `full` and `light` tags run other tools)",
    )
    source: str = Field(description="where the entrypoint is defined (Dockerfile at a release)")


class ConversionStep(BaseModel):
    """The step that turns a Hugging Face checkpoint into the file the engine loads (llama.cpp: GGUF)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    loads: str = Field(description="file suffix the engine loads, e.g. '.gguf'")
    command: str = Field(description="template with {model}, {out} and {outtype}")
    outtypes: list[str] = Field(description="--outtype values the converter accepts")
    quantize: str | None = Field(
        default=None,
        description="template with {src}, {out} and {type} for the quantizer (types the converter cannot write)",
    )
    source: str = Field(description="the converter and quantizer at a release (URL)")


class InlineValues(BaseModel):
    """How the engine's parser reads a value written after '=' inside the option's own word (`--opt=value`, `-o=v`);
    a value joined to a one-letter option (`-O3`) is the release data's (ParserRules.attached_short)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    equals: Literal["any", "long", "none"] = Field(
        description="where a word is split at its first '=' into option and value: any option word (argparse, clap: "
        "`-tp=2`, `-p=80`), only `--` words (click), or none (llama.cpp looks the whole word up as an "
        "option name, so `--ctx-size=4096` is refused)"
    )
    source: str = Field(description="the parser's rule at a release or in its documentation (URL)")


class LaunchSyntax(_LaunchFact):
    """How a launch command is spelled, for parsing and rendering."""

    command: str
    model_arg: str = Field(description="'positional' or the flag that names the model")
    model_aliases: list[str] = Field(
        default_factory=list, description="other spellings of the model flag (llama.cpp -m is also --model)"
    )
    bool_style: Literal["paired", "store_true", "value"] = Field(
        description="paired: --x/--no-x; store_true: --x only; value: --x true"
    )
    config_file: str | None = Field(default=None, description="flag naming a YAML that overrides the CLI")
    config_flags: list[str] = Field(
        default_factory=list,
        description="flags naming a YAML of launch settings "
        "(keys spelled like the flags) that the launch parser reads in",
    )
    config_overrides_cli: bool = Field(
        default=True,
        description="the YAML's settings win over command-line flags "
        "(TRT-LLM); false: the command line wins (vLLM, SGLang)",
    )
    aliases: list[LaunchAlias] = Field(default_factory=list, description="other commands that start the same server")
    images: list[ImageSpec] = Field(default_factory=list, description="container images that run this engine")
    env_prefixes: list[str] = Field(
        default_factory=list,
        description="prefixes of the engine's own environment "
        "variables (VLLM_, SGLANG_ ...): read by the engine, meaningless to another",
    )
    conversion: ConversionStep | None = Field(default=None, description="checkpoint conversion before a launch")
    inline_values: InlineValues | None = Field(
        default=None,
        description="how a value is written into the option's word; None: only `--opt=value` is split (click's rule)",
    )

    def commands(self) -> list[tuple[str, str]]:
        """(command, model_arg) for the main spelling and every alias."""
        return [(self.command, self.model_arg), *((a.command, a.model_arg) for a in self.aliases)]
