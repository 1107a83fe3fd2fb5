#!/usr/bin/python3
"""Keywords and the explore header in the Python package (python/attend).

A keyword that Hugging Face or CTranslate2 users would type (num_beams, beam_size,
num_return_sequences, output_attentions, max_new_tokens, decoder_input_ids ...) raises a
TypeError that names attend's option, in Model.translate, Model.score, Model(...) and
attend.explore; other unknown keywords get the closest options. attend.explore(results)
fills its header (model file, search) from the results as attend explore does (the page's
data equal the CLI's with no model= or settings=), and refuses results without attention
up front, naming attention=True. Run: /usr/bin/python3 tests/test_python_options.py"""
import inspect
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import testlib as T  # noqa: E402

sys.path.insert(0, os.path.join(T.REPO, "python"))
import attend  # noqa: E402
from attend import _options  # noqa: E402

MODEL = os.path.join(T.REPO, "models", "de-en.gguf")
TMP = T.tempdir()
M = None

# the list: their keyword -> what the message must name
EXPECTED = {
    "num_beams": "beam", "beam_size": "beam",
    "num_return_sequences": "n_best", "num_hypotheses": "n_best",
    "output_attentions": "attention", "return_attention": "attention",
    "max_new_tokens": "max_length", "max_decoding_length": "max_length",
    "do_sample": "sample", "sampling_topk": "top_k",
}


def model():
    global M
    if M is None:
        M = attend.Model(MODEL, threads=1)
    return M


def type_error(fn, *args, **kw):
    """fn's TypeError message (AssertionError when it raises none)."""
    try:
        fn(*args, **kw)
    except TypeError as e:
        assert "unexpected keyword argument" in str(e), str(e)
        return str(e)
    raise AssertionError(f"{args} {kw}: no TypeError")


def foreign_keywords_name_attends():
    m = model()
    for theirs, ours in EXPECTED.items():
        msg = type_error(m.translate, "Hallo", **{theirs: 2})
        assert msg.startswith(f"Model.translate() got an unexpected keyword argument '{theirs}'"), msg
        assert f"attend calls it {ours}" in msg, msg
        assert ours in inspect.signature(attend.Model.translate).parameters, ours
    msg = type_error(m.translate, "Hallo", decoder_input_ids=[[1]])
    assert "attend calls it target_prefix" in msg and "Hugging Face" in msg, msg
    msg = type_error(m.translate, "Hallo", device="cuda")
    assert "CPU" in msg and "CTranslate2" in msg, msg
    msg = type_error(m, "Hallo", num_beams=4)  # Model(...) as a function is translate
    assert "attend calls it beam" in msg, msg


def every_hint_is_a_real_option():
    """The table points only at options that exist (of translate, or of Model())."""
    options = set(inspect.signature(attend.Model.translate).parameters) | \
        set(inspect.signature(attend.Model.__init__).parameters)
    for theirs, (ours, whose, note) in _options.FOREIGN.items():
        assert ours is None or ours in options, (theirs, ours)
        assert ours is not None or note, theirs
        assert theirs not in options, theirs  # a name of our own is never refused


def other_calls_hint_too():
    m = model()
    msg = type_error(m.score, "Hallo", "Hello", num_beams=4)
    assert "attend calls it beam, which Model.score() does not take" in msg, msg
    msg = type_error(m.score, "Hallo", "Hello", return_attention=True)
    assert "attend calls it attention" in msg, msg
    msg = type_error(attend.Model, MODEL, intra_threads=2)
    assert msg.startswith("Model() got") and "attend calls it threads" in msg, msg
    msg = type_error(m.translate, "Hallo", compute_type="bfloat16")  # Model()'s, not a call's
    assert msg.startswith("Model.translate() got an unexpected keyword argument 'compute_type'"), msg
    rs = m.translate(["Hallo"], attention=True)
    msg = type_error(attend.explore, rs, presets="x")
    assert msg.startswith("explore() got") and "did you mean preset" in msg, msg


def unknown_keywords_get_close_matches():
    m = model()
    for typo, option in (("beams", "beam"), ("atention", "attention"), ("src_language", "src_lang"),
                         ("nbest", "n_best"), ("num_beam", "beam")):
        msg = type_error(m.translate, "Hallo", **{typo: 1})
        assert msg.endswith(f"did you mean {option}?"), msg
    msg = type_error(m.translate, "Hallo", frobnicate=1)
    assert "takes lines, beam, greedy" in msg and "tgt_lang" in msg, msg


def signatures_and_good_calls_unchanged():
    m = model()
    params = inspect.signature(attend.Model.translate).parameters
    assert "beam" in params and "attention" in params and "options" not in params
    assert "Translate one line" in (attend.Model.translate.__doc__ or "")
    assert m.translate("Wo ist der Bahnhof?", beam=2).text == m("Wo ist der Bahnhof?", beam=2).text
    r = m.score(source="Ich habe Hunger.", target="I am hungry.", attention=False)
    assert r.cross is None and r.logprob is not None
    assert attend.Model(path=MODEL, threads=1).translate(lines="Hallo").text


def page_json(path):
    text = open(path, encoding="utf-8").read()
    return json.loads(text.split('id="attend-data">')[1].split("</script>")[0])


def explore_header_from_results():
    """No model= or settings=: the same data as attend explore (model de-en.gguf, the
    model's beams), for translations and for forced decoding."""
    m = model()
    lines = ["Ich habe Hunger.", "", "Wo ist der Bahnhof?"]
    cli, py = os.path.join(TMP, "cli.html"), os.path.join(TMP, "py.html")
    T.run_attend(["explore", "-m", MODEL, "-t", "1", "-o", cli], input_text="\n".join(lines) + "\n")
    attend.explore(m.translate(lines, attention=True), py)
    want, got = page_json(cli), page_json(py)
    assert got["model"] == "de-en.gguf" and got["settings"] == want["settings"], (got["model"], got["settings"])
    assert want["settings"].startswith("beam search, "), want["settings"]
    assert got == want, "page data differ from the CLI's"
    T.run_attend(["explore", "-m", MODEL, "-t", "1", "-o", cli, "--greedy", "Ich habe Hunger."])
    attend.explore(m.translate("Ich habe Hunger.", greedy=True, attention=True), py)
    assert page_json(py) == page_json(cli), "greedy page data differ from the CLI's"
    T.run_attend(["explore", "-m", MODEL, "-t", "1", "-o", cli, "Ich habe Hunger.", "--target", "I am hungry."])
    attend.explore(m.score("Ich habe Hunger.", "I am hungry."), py)
    assert page_json(py) == page_json(cli), "forced page data differ from the CLI's"
    # given ones still win
    attend.explore(m.score("Ich habe Hunger.", "I am hungry."), py, model="mine", settings="forced")
    d = page_json(py)
    assert (d["model"], d["settings"]) == ("mine", "forced"), (d["model"], d["settings"])
    assert "model model" not in attend.explore(m.translate("Hallo", attention=True)).html


def explore_refuses_results_without_attention():
    m = model()
    path = os.path.join(TMP, "none.html")
    for rs, call in ((m.translate(["", "Ich habe Hunger."]), "translate"),
                     ([m.score("Ich habe Hunger.", "I am hungry.", attention=False)], "score")):
        try:
            attend.explore(rs, path)
        except ValueError as e:
            msg = str(e)
        else:
            raise AssertionError("explore accepted results without attention")
        assert "attention=True" in msg and f"Model.{call}(" in msg and "Ich habe Hunger." in msg, msg
        assert not os.path.exists(path)
    msg = ""
    try:
        attend.explore(m.translate(["Hallo"], attention=True, scores=False), path)
    except ValueError as e:
        msg = str(e)
    assert "scores" in msg, msg
    try:
        attend.explore(["not a result"])
    except ValueError as e:
        assert "Model.translate" in str(e), str(e)
    else:
        raise AssertionError("explore accepted a str")


def main():
    run = T.Runner()
    for name, fn in [("HF / CTranslate2 keywords name attend's option (translate, __call__)",
                      foreign_keywords_name_attends),
                     ("every hint names a real option", every_hint_is_a_real_option),
                     ("score, Model() and explore hint too", other_calls_hint_too),
                     ("other unknown keywords: the closest options, else all", unknown_keywords_get_close_matches),
                     ("signatures, docstrings and good calls unchanged", signatures_and_good_calls_unchanged),
                     ("explore's header comes from the results, as attend explore's",
                      explore_header_from_results),
                     ("explore refuses results without attention up front, naming attention=True",
                      explore_refuses_results_without_attention)]:
        run.check(name, fn)
    run.finish()


if __name__ == "__main__":
    main()
