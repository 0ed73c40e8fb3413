"""`uatlab predict`: a compiled model saved by `uatlab compile` tags sentences from a text file."""

import json

import pytest

from uatlab.cli import main
from uatlab.data.jsonl import read_jsonl
from uatlab.errors import InputError


def _synth_and_compile(tmp_path):
    """(model path, data): 30 synthetic sentences of 5 tokens and the model compiled from them."""
    data_path = tmp_path / "d.jsonl"
    assert main(["synth", str(data_path), "-N", "30", "-n", "5", "-V", "15", "-C", "3", "--json"]) == 0
    model = tmp_path / "m.safetensors"
    assert main(["compile", str(data_path), "--out", str(model), "--json"]) == 0
    return model, read_jsonl(data_path)


def test_compile_then_predict_from_the_command_line(tmp_path, capsys):
    model, data = _synth_and_compile(tmp_path)
    text = tmp_path / "s.txt"
    text.write_text("\n".join(" ".join(t) for t in data.tokens[:5]) + "\n")
    capsys.readouterr()
    assert main(["predict", str(model), str(text), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["sentences"] == 5 and out["labels"] == data.labels[:5]
    assert main(["predict", str(model), str(text)]) == 0
    rows = capsys.readouterr().out.split("\n")
    conll = tmp_path / "c.txt"
    conll.write_text(
        "-DOCSTART- O\n\n" + "\n".join(f"{t} {y}" for t, y in zip(data.tokens[0], data.labels[0], strict=True)) + "\n"
    )
    assert main(["predict", str(model), str(conll), "--format", "conll", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["labels"] == [data.labels[0]]
    assert rows[0] == f"{data.tokens[0][0]}\t{data.labels[0][0]}"
    text.write_text("never-seen-word\n")
    assert main(["predict", str(model), str(text)]) == 2
    err = " ".join(capsys.readouterr().err.split())  # the console may wrap the line
    assert f"{text}:1: sentence 0, position 0: token 'never-seen-word' is not in the model's vocabulary" in err


def test_auto_format_reads_tagged_columns_as_conll_and_anything_else_as_text(tmp_path):
    from uatlab.cli.predict import read_sentences

    conll = tmp_path / "a.txt"
    conll.write_text("-DOCSTART- -X- O O\n\nZorbia NNP B-NP B-ORG\npraises VBZ B-VP O\n")
    text = tmp_path / "b.txt"
    text.write_text("Zorbia praises Quarkish plan\nAlva Morrow\n")
    assert read_sentences(conll, "auto") == [["Zorbia", "praises"]]
    assert read_sentences(text, "auto") == [["Zorbia", "praises", "Quarkish", "plan"], ["Alva", "Morrow"]]


def test_auto_format_reads_untagged_conll_as_conll_like_compile_and_refuses_the_ambiguous_case(tmp_path, capsys):
    from uatlab.cli.predict import read_sentences
    from uatlab.data.conll import read_conll

    pos = tmp_path / "pos.conll"  # POS labels, not IOB tags: still CoNLL for compile and certify
    pos.write_text("the DET\ncat NOUN\nsat VERB\n\nthe DET\ndog NOUN\n\n")
    norm = tmp_path / "norm.conll"  # labels that are words
    norm.write_text("The the\ncat cat\n\nthe the\nCat cat\n\n")
    for data in (pos, norm):
        model = tmp_path / f"{data.stem}.safetensors"
        assert main(["compile", str(data), "--out", str(model), "--json"]) == 0
        capsys.readouterr()
        assert main(["predict", str(model), str(data), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        gold = read_conll(data)
        assert out["tokens"] == sum(len(t) for t in gold.tokens)
        assert out["labels"] == gold.labels  # a compiled model reproduces its data: the words were read as words
    text = tmp_path / "s.txt"  # plain text, sentences of several words
    text.write_text("the cat sat\nthe dog\n")
    assert read_sentences(text, "auto") == [["the", "cat", "sat"], ["the", "dog"]]
    two = tmp_path / "two.txt"  # 'word label' lines or two-word sentences: both readings are possible
    two.write_text("the cat\nthe dog\n")
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "pos.safetensors"), str(two)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert str(two) in err and "--format conll or --format text" in err
    assert read_sentences(two, "text") == [["the", "cat"], ["the", "dog"]]
    assert read_sentences(two, "conll") == [["the", "the"]]


def test_unlabelled_conll_one_token_per_line_is_read_by_sentence(tmp_path, capsys):
    # one token per line, a blank line between sentences: each sentence is one input (the model sees its context),
    # the same labels as the same sentences given one per line
    model, data = _synth_and_compile(tmp_path)
    blocks = tmp_path / "tokens.conll"
    blocks.write_text("-DOCSTART-\n\n" + "\n\n".join("\n".join(t) for t in data.tokens[:6]) + "\n")
    capsys.readouterr()
    for fmt in ("auto", "conll"):
        assert main(["predict", str(model), str(blocks), "--format", fmt, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["sentences"] == 6 and out["labels"] == data.labels[:6], fmt
    # a line with a second column in such a file is named
    blocks.write_text("t1\nt2 c0\n\nt3\n")
    assert main(["predict", str(model), str(blocks), "--format", "conll"]) == 2
    assert f"{blocks}:2: 2 columns in a file of one token per line" in " ".join(capsys.readouterr().err.split())


def test_text_whose_last_words_look_like_tags_is_read_as_text(tmp_path):
    from uatlab.cli.predict import read_sentences

    cases = {
        "please send E-mail\n": [["please", "send", "E-mail"]],  # one line: a sentence, whatever its last word
        "please send E-mail\nwe like it\n": [["please", "send", "E-mail"], ["we", "like", "it"]],  # not all tagged
        "we ride B-52\nthey take I-95\n": None,  # every line ends in a tag-like word: read as CoNLL
    }
    for i, (text, want) in enumerate(cases.items()):
        path = tmp_path / f"t{i}.txt"
        path.write_text(text)
        got = read_sentences(path, "auto")
        assert got == (want if want is not None else [["we", "they"]]), text


def test_jsonl_without_labels_is_read_for_prediction(tmp_path, capsys):
    model, data = _synth_and_compile(tmp_path)
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"tokens": t}) + "\n" for t in data.tokens[:4]))
    capsys.readouterr()
    assert main(["predict", str(model), str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["labels"] == data.labels[:4]
    path.write_text('{"words": ["t1"]}\n')  # still an object with "tokens"
    assert main(["predict", str(model), str(path)]) == 2
    assert f'{path}:1: expected an object with "tokens"' in " ".join(capsys.readouterr().err.split())


def test_conll_with_a_missing_label_is_refused_naming_the_line_by_every_command(tmp_path, capsys):
    # the labels are words of the vocabulary too, so a plain-text reading of the broken file would run
    data = tmp_path / "d.conll"
    data.write_text("the DET\ncat NOUN\nsat VERB\n\nDET DET\nNOUN NOUN\nVERB VERB\n\ndog NOUN\n")
    model = tmp_path / "m.safetensors"
    assert main(["compile", str(data), "--out", str(model), "--json"]) == 0
    good = "the DET\ncat NOUN\nsat VERB\n\nthe DET\ndog NOUN\n\nDET DET\ncat NOUN\n".split("\n")
    for bad_line in (1, 2, 6):
        lines = list(good)
        word = lines[bad_line - 1].split()[0]
        lines[bad_line - 1] = word  # the label column of this line is missing
        bad = tmp_path / f"bad{bad_line}.conll"
        bad.write_text("\n".join(lines))
        for argv in (
            ["predict", str(model), str(bad)],
            ["predict", str(model), str(bad), "--format", "conll"],
            ["compile", str(bad), "--out", str(tmp_path / f"c{bad_line}.safetensors")],
            ["certify", str(model), str(bad)],
        ):
            capsys.readouterr()
            assert main(argv) == 2, argv
            err = " ".join(capsys.readouterr().err.split())
            assert f"{bad}:{bad_line}: " in err and repr(word) in err, (argv, err)
        capsys.readouterr()
        assert main(["predict", str(model), str(bad), "--format", "text", "--json"]) == 0  # read as asked
        assert json.loads(capsys.readouterr().out)["sentences"] == sum(1 for x in lines if x.strip())


def test_text_with_one_word_lines_and_unlabelled_conll_are_still_read(tmp_path):
    from uatlab.cli.predict import read_sentences

    text = tmp_path / "t.txt"  # sentences of one word and of two: plain text
    text.write_text("hello world\nhi\nbye now\n")
    assert read_sentences(text, "auto") == [["hello", "world"], ["hi"], ["bye", "now"]]
    text.write_text("the cat sat\nhi\n\nthe dog ran\nbye\n")  # one-word lines as many as the others
    assert read_sentences(text, "auto") == [["the", "cat", "sat"], ["hi"], ["the", "dog", "ran"], ["bye"]]
    blocks = tmp_path / "u.conll"  # unlabelled CoNLL, a line of two columns among them: that line is named
    blocks.write_text("t1\nt2\nt3 x\n\nt4\n")
    with pytest.raises(InputError, match=rf"{blocks}:3: 2 columns in a file of one token per line"):
        read_sentences(blocks, "conll")


def test_auto_format_says_how_the_file_was_read_and_json_lists_the_words(tmp_path, capsys):
    # paragraphs of three-word lines have the shape of CoNLL columns; their last words are not the model's labels,
    # so they are read as plain text; the model's own labelled data is read as CoNLL. The reading is said on
    # stderr, and the JSON shows the words read and the format
    data = tmp_path / "d.conll"
    data.write_text("EU B-ORG\nrejects O\nGerman B-MISC\n\nPeter B-PER\nBlackburn I-PER\nsaid O\n")
    model = tmp_path / "m.safetensors"
    assert main(["compile", str(data), "--out", str(model), "--json"]) == 0
    para = tmp_path / "para.txt"
    para.write_text("EU rejects German\n\nPeter Blackburn said\n")
    cases = [
        (para, "plain text", "--format conll", "text", [["EU", "rejects", "German"], ["Peter", "Blackburn", "said"]]),
        (data, "CoNLL", "--format text", "conll", [["EU", "rejects", "German"], ["Peter", "Blackburn", "said"]]),
    ]
    for path, reading, other, fmt, words in cases:
        for extra in ([], ["--json"]):
            capsys.readouterr()
            assert main(["predict", str(model), str(path), *extra]) == 0
            cap = capsys.readouterr()
            notes = [line for line in cap.err.splitlines() if line.startswith("note:")]
            assert len(notes) == 1, cap.err
            assert f"{path} read as {reading}" in notes[0] and other in notes[0], notes
        out = json.loads(cap.out)
        assert out["format"] == fmt and out["words"] == words
        assert [len(w) for w in out["words"]] == [len(y) for y in out["labels"]]
        assert out["tokens"] == sum(len(w) for w in out["words"])
    # read as text, as the note says: every word, no note (the format was given), the JSON says "text"
    assert main(["predict", str(model), str(para), "--format", "text", "--json"]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert "note:" not in cap.err and out["format"] == "text"
    assert out["words"] == [["EU", "rejects", "German"], ["Peter", "Blackburn", "said"]]
    assert out["labels"] == [["B-ORG", "O", "B-MISC"], ["B-PER", "I-PER", "O"]]
    # plain text detected as such is named too, with the option that reads it as CoNLL
    text = tmp_path / "t.txt"
    text.write_text("EU rejects German\nPeter said\n")
    assert main(["predict", str(model), str(text)]) == 0
    err = capsys.readouterr().err
    assert f"note: {text} read as plain text" in err and "--format conll" in err


def test_predict_checks_its_input_file_once(tmp_path, capsys, monkeypatch):
    """The input file is checked once, before the model is opened; a missing one is named."""
    import uatlab.cli.predict as predict

    model, data = _synth_and_compile(tmp_path)
    text = tmp_path / "s.txt"
    text.write_text(" ".join(data.tokens[0]) + "\n")
    checked = []
    real = predict.check_input_file
    monkeypatch.setattr(predict, "check_input_file", lambda p, what: (checked.append((p, what)), real(p, what))[1])
    capsys.readouterr()
    assert main(["predict", str(model), str(text), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["labels"] == [data.labels[0]]
    assert checked == [(text, "input file")]
    assert main(["predict", str(tmp_path / "missing.safetensors"), str(tmp_path / "gone.txt")]) == 2
    assert f"error: input file {tmp_path / 'gone.txt'} does not exist" in " ".join(capsys.readouterr().err.split())


def test_predict_labels_and_prints_in_parts_with_progress(tmp_path, capsys, monkeypatch):
    """A long input is labelled a part at a time under a progress bar, each part printed when labelled: the text
    is the one the whole input labelled at once gives, and an interrupt keeps what was printed and says how much."""
    import uatlab
    import uatlab.cli.predict as predict_cli

    model, data = _synth_and_compile(tmp_path)
    text = tmp_path / "s.txt"
    text.write_text("\n".join(" ".join(t) for t in data.tokens) + "\n")
    whole = uatlab.load(model).predict(data.tokens)
    expected = (
        "\n\n".join(
            "\n".join(f"{t}\t{y}" for t, y in zip(s, labs, strict=True))
            for s, labs in zip(data.tokens, whole, strict=True)
        )
        + "\n"
    )
    monkeypatch.setattr(predict_cli, "PART_TOKENS", 12)  # 5-token sentences: 2 a part, 15 parts
    capsys.readouterr()
    assert main(["predict", str(model), str(text), "--format", "text"]) == 0
    got = capsys.readouterr()
    assert got.out == expected
    assert "labelling" in got.err
    assert main(["predict", str(model), str(text), "--format", "text", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["labels"] == whole

    real, calls = uatlab.models.transformer.Transformer.predict, []

    def interrupted_at_the_third_part(self, sentences, *a, **k):
        calls.append(len(sentences))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, sentences, *a, **k)

    monkeypatch.setattr(uatlab.models.transformer.Transformer, "predict", interrupted_at_the_third_part)
    assert main(["predict", str(model), str(text), "--format", "text"]) == 130
    got = capsys.readouterr()
    assert got.out == "\n\n".join(expected.split("\n\n")[:4]) + "\n\n"  # the first two parts: 4 sentences
    assert got.err.strip().splitlines()[-1] == "interrupted: the labels of the first 4 of 30 sentences were printed"


def test_predicted_lines_never_start_at_the_end_of_the_progress_bar(tmp_path, capsys, monkeypatch):
    """On a terminal stdout and the bar (stderr) share the screen: the bar is cleared before each part is
    printed, so what the screen shows of every line (its text after the last carriage return) is a bar or a
    ``token<TAB>label`` line, never both."""
    import io
    import sys

    import uatlab.cli.predict as predict_cli

    model, data = _synth_and_compile(tmp_path)
    text = tmp_path / "s.txt"
    text.write_text("\n".join(" ".join(t) for t in data.tokens) + "\n")
    monkeypatch.setattr(predict_cli, "PART_TOKENS", 12)
    screen = io.StringIO()  # one stream for both, as a terminal shows them
    monkeypatch.setattr(sys, "stdout", screen)
    monkeypatch.setattr(sys, "stderr", screen)
    assert main(["predict", str(model), str(text), "--format", "text"]) == 0
    shown = [line.rsplit("\r", 1)[-1] for line in screen.getvalue().split("\n")]
    labelled = [line for line in shown if "\t" in line]
    assert len(labelled) == data.num_tokens
    assert not [line for line in labelled if "labelling" in line or "tok/s" in line], labelled[:3]
