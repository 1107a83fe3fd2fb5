"""Keyword arguments by the names people bring from Hugging Face and CTranslate2: a call
given one of them raises a TypeError that names attend's option (``num_beams`` -> ``beam``);
any other unknown keyword gets the call's closest options (difflib), or the list of them."""
from __future__ import annotations

import difflib
import functools
import inspect
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])

HF = "Hugging Face's"
CT2 = "CTranslate2's"

# their keyword: (attend's option, or None where attend has none; whose name it is; a note)
FOREIGN: Dict[str, Tuple[Optional[str], str, str]] = {
    "num_beams": ("beam", HF, ""),
    "beam_size": ("beam", CT2, ""),
    "num_return_sequences": ("n_best", HF, "Result.nbest holds the K best"),
    "num_hypotheses": ("n_best", CT2, "Result.nbest holds the K best"),
    "output_attentions": ("attention", HF, "every matrix comes as numpy arrays on each Result"),
    "return_attention": ("attention", CT2, "every matrix comes as numpy arrays on each Result"),
    "output_scores": ("scores", HF, ""),
    "return_scores": ("scores", CT2, ""),
    "output_logits": ("logits", HF, ""),
    "return_logits_vocab": ("logits", CT2, ""),
    "max_new_tokens": ("max_length", HF, "max_length counts the start token: max_new_tokens + 1"),
    "max_decoding_length": ("max_length", CT2, "max_length counts the start token"),
    "min_new_tokens": ("min_length", HF, ""),
    "min_decoding_length": ("min_length", CT2, ""),
    "do_sample": ("sample", HF, ""),
    "sampling_topk": ("top_k", CT2, "with sample=True"),
    "sampling_topp": ("top_p", CT2, "with sample=True"),
    "sampling_temperature": ("temperature", CT2, "with sample=True"),
    "max_batch_size": ("batch_size", CT2, "or batch_tokens for a budget of source tokens"),
    "batch_type": ("batch_tokens", CT2, "batch_type='tokens', max_batch_size=N is batch_tokens=N"),
    "intra_threads": ("threads", CT2, ""),
    "num_threads": ("threads", "a common", ""),
    "forced_bos_token_id": ("tgt_lang", HF, "the target language's code, e.g. tgt_lang='fr'"),
    "decoder_input_ids": ("target_prefix", HF, "the prefix as text, without the start token"),
    "return_dict_in_generate": (None, HF, "not needed: each Result holds the text, tokens, "
                                          "scores and (with attention=True) attention"),
    "device": (None, CT2, "attend runs on the CPU"),
}


def _accepted(fn: Callable[..., Any]) -> List[str]:
    """The keywords fn takes, in order (self left out)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [n for n, p in inspect.signature(fn).parameters.items() if p.kind in kinds and n != "self"]


def unknown_keyword(call: str, name: str, accepted: Sequence[str]) -> TypeError:
    """The TypeError for keyword ``name``, which ``call`` (e.g. "Model.translate") does not
    take: attend's name for it when it is Hugging Face's or CTranslate2's, else the closest
    of ``accepted``, else all of them."""
    head = f"{call}() got an unexpected keyword argument {name!r}"
    if name in FOREIGN:
        option, whose, note = FOREIGN[name]
        head += f" ({whose} name)"
        if option is None:
            return TypeError(f"{head}: {note or 'attend has no such option'}")
        if option in accepted:
            return TypeError(f"{head}: attend calls it {option}" + (f" ({note})" if note else ""))
        return TypeError(f"{head}: attend calls it {option}, which {call}() does not take "
                         f"(it takes {', '.join(accepted)})")
    guesses: List[str] = []
    for g in difflib.get_close_matches(name, list(accepted) + list(FOREIGN), n=4, cutoff=0.7):
        option = g if g in accepted else FOREIGN[g][0]
        if option in accepted and option not in guesses:
            guesses.append(option)
    if guesses:
        return TypeError(f"{head}: did you mean {' or '.join(guesses[:3])}?")
    return TypeError(f"{head}; {call}() takes {', '.join(accepted)}")


def hint_keywords(fn: F) -> F:
    """fn, raising unknown_keyword()'s TypeError for a keyword it does not take (before
    Python's bare one); signature and help stay fn's."""
    params = inspect.signature(fn).parameters
    accepted = _accepted(fn)
    call = fn.__qualname__.replace(".__init__", "")

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        for k in kwargs:
            if k not in params:
                raise unknown_keyword(call, k, accepted)
        return fn(*args, **kwargs)
    return cast(F, checked)
