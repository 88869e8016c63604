"""The special tokens, reserved ids and templates of the tokenizers that `vocab --model bpe|unigram` writes, in the
two shapes today's encoders publish:

    bert     [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, then the learned tokens, then [unused0] [unused1] ...;
             [CLS] A [SEP] B [SEP], token types 0 up to B and 1 from it (BERT's; ModernBERT's specials on a
             byte-level BPE, which registers an [UNK] that such a vocab never needs)
    roberta  <s>=0 <pad>=1 </s>=2 <unk>=3, then the learned tokens, then <unused0> ..., and <mask> the last id;
             <s> A </s></s> B </s>, every token of type 0 (RoBERTa's and XLM-R's order, as its published
             tokenizer.json has it)

The reserved ids come after the learned tokens (ModernBERT keeps 83, [unused0] to [unused82], after its own), so
that a vocab with them has the same ids for every learned token as one without; --pad-to-multiple adds more of them.
Every special and reserved token is registered as a special added token, and create never draws one as a random
replacement (their names are those tokenizer_file.RESERVED knows).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tokenizers import AddedToken, processors

BERT, ROBERTA = "bert", "roberta"


@dataclass(frozen=True)
class SpecialSet:
    """One shape: the special tokens before the learned ones and after the reserved ones, the role of each, the names
    of reserved ids, and the templates as tokenizers' TemplateProcessing writes them."""

    name: str
    leading: tuple[str, ...]
    trailing: tuple[str, ...]
    roles: tuple[tuple[str, str], ...]  # (role, token), the names transformers' configs give them
    reserved_name: str  # with {} for the number
    single: str
    pair: str
    model_input_names: tuple[str, ...]
    lstrip: tuple[str, ...] = ()  # tokens that take the space before them, as RoBERTa's <mask> does

    @property
    def tokens(self) -> tuple[str, ...]:
        return (*self.leading, *self.trailing)

    def token(self, role: str) -> str:
        return dict(self.roles)[role]

    def reserved(self, first: int, count: int) -> list[str]:
        return [self.reserved_name.format(i) for i in range(first, first + count)]


SPECIAL_SETS = {
    BERT: SpecialSet(
        name=BERT,
        leading=("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"),
        trailing=(),
        roles=(("pad", "[PAD]"), ("unk", "[UNK]"), ("cls", "[CLS]"), ("sep", "[SEP]"), ("mask", "[MASK]")),
        reserved_name="[unused{}]",
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        model_input_names=("input_ids", "token_type_ids", "attention_mask"),
    ),
    ROBERTA: SpecialSet(
        name=ROBERTA,
        leading=("<s>", "<pad>", "</s>", "<unk>"),
        trailing=("<mask>",),
        roles=(
            ("bos", "<s>"),
            ("cls", "<s>"),
            ("eos", "</s>"),
            ("sep", "</s>"),
            ("pad", "<pad>"),
            ("unk", "<unk>"),
            ("mask", "<mask>"),
        ),
        reserved_name="<unused{}>",
        single="<s>:0 $A:0 </s>:0",
        pair="<s>:0 $A:0 </s>:0 </s>:0 $B:0 </s>:0",
        model_input_names=("input_ids", "attention_mask"),
        lstrip=("<mask>",),
    ),
}


def post_processor(specials: SpecialSet, ids: dict[str, int]) -> processors.TemplateProcessing:
    """The templates around one sequence and two, with the ids of the tokens they add."""
    used = sorted({word.split(":")[0] for word in f"{specials.single} {specials.pair}".split() if word[0] != "$"})
    return processors.TemplateProcessing(
        single=specials.single, pair=specials.pair, special_tokens=[(token, ids[token]) for token in used]
    )


def added_tokens(specials: SpecialSet, reserved: list[str]) -> list[AddedToken]:
    """The special and reserved tokens as special added tokens, matched before normalisation, as published
    tokenizers register theirs."""
    return [
        AddedToken(token, special=True, normalized=False, lstrip=token in specials.lstrip)
        for token in [*specials.leading, *reserved, *specials.trailing]
    ]


def config_files(specials: SpecialSet, lowercase: bool, max_length: int = 512) -> dict[str, bytes]:
    """tokenizer_config.json and special_tokens_map.json, which name every special token by its role: what
    AutoTokenizer reads beside tokenizer.json (the generic fast class, which takes tokenizer.json as it is), and what
    create --tokenizer takes the special tokens from."""
    named = {f"{role}_token": token for role, token in specials.roles}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "do_lower_case": lowercase,
        "model_max_length": max_length,
        "clean_up_tokenization_spaces": False,
        "model_input_names": list(specials.model_input_names),
        **named,
    }
    return {"tokenizer_config.json": _json_bytes(config), "special_tokens_map.json": _json_bytes(named)}


def _json_bytes(payload: dict) -> bytes:
    return (json.dumps(payload, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()
