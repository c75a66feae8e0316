"""How a paste reached us is undone before it is judged, without eating what the program printed."""

from __future__ import annotations

from mcp_gpu.triage.engine import triage_text
from mcp_gpu.triage.paste import dedent, normalise, strip_shared_prefix

TRACE = ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>', "    loss.backward()",
         "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"]


def test_a_container_name_on_every_line_is_cut_and_the_frames_keep_their_indent() -> None:
    text = "\n".join(f"trainer-1  | {line}" for line in ["step 1 loss 2.0", *TRACE])
    assert strip_shared_prefix(text).split("\n")[1:4] == TRACE[:3]
    assert triage_text(text).primary == "cuda_oom"


def test_a_worker_prefix_whose_pid_varies_is_one_prefix() -> None:
    text = "\n".join(f"(RayTrainWorker pid={pid}) {line}" for pid, line in zip((7, 1234, 56, 1234, 7), ["ok", *TRACE],
                                                                            strict=True))
    assert strip_shared_prefix(text).split("\n")[1] == TRACE[0]


def test_the_programs_own_words_are_not_a_prefix() -> None:
    # every line starts the same way because the program wrote it so: a subsystem tag, a JSON key, a step counter
    nvrm = "\n".join(f"[{2285 + i}.08] NVRM: Xid (PCI:0000:01:00): 31, pid=1{i}, MMU Fault" for i in range(4))
    assert all(line.startswith("NVRM: Xid") for line in strip_shared_prefix(nvrm).split("\n"))
    assert triage_text(nvrm).primary == "cuda_device_error"
    for text in ("\n".join(f'"grad_norm": {v},' for v in ("NaN", "1.3", "NaN", "1.2")),
                 "\n".join(f"step {i} | loss {2 - i / 10:.2f} | lr 3e-4" for i in range(1, 9)),
                 "\n".join(f"INFO: epoch {i} done" for i in range(5))):
        assert strip_shared_prefix(text) == text


def test_a_code_block_indent_is_removed_but_a_paste_of_frames_alone_keeps_its_shape() -> None:
    indented = "\n".join("    " + line for line in TRACE)
    assert dedent(indented).split("\n") == TRACE
    frames = "\n".join(TRACE[1:3] * 3)
    assert dedent(frames) == frames


def test_a_markdown_quote_a_prefix_and_an_indent_together() -> None:
    text = "\n".join(f">     [stderr] {line}" for line in TRACE)
    assert normalise(text).split("\n") == TRACE


def test_a_message_cut_mid_word_near_the_end_is_joined_where_the_cut_splits_a_rules_words() -> None:
    text = ("INFO:root:Epoch[0] Batch [2260] Speed: 0.34 samples/sec Train-RCNNAcc=0.795092, RCNNLogLoss=0.639085,\n"
            "terminate called after throwing an instance of 'dmlc::Error'\n"
            "  what():  [10:44:35] src/engine/./threaded_engine.h:359: [10:44:35] src/storage/./pooled_storage_manager"
            ".h:107: cudaMalloc fail\n"
            "ed: out of memory\n")
    assert triage_text(text).primary == "cuda_oom"
    # a short next line that only happens to start in lower case is not glued on
    plain = "step 10 | loss 0.51 | lr 3e-4 | tokens/s 51234 | mfu 0.41 | grad_norm 0.8 | elapsed 1:00\nsaving checkpoint\n"
    assert normalise(plain) == plain
