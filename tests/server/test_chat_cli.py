# `ember chat`: the conversation is kept (turn 2 equals the server's reply to the whole conversation), /reset starts
# over, stdin may be a pipe, and Ctrl-C (on a terminal) stops the reply but not the program.
import os
import pty
import select
import subprocess
import time

from conftest import EMBER, SMOLLM2, ember_generate, need_smollm2


def test_chat_keeps_the_conversation(client):
    need_smollm2()
    q1, q2, q3 = "What is the capital of France?", "And of Italy?", "Name a red fruit."
    out = subprocess.run([EMBER, "chat", "-m", SMOLLM2, "--device", "cpu", "-n", "40"],
                         input=f"{q1}\n{q2}\n/reset\n{q3}\n/exit\nnot read\n", capture_output=True, text=True,
                         timeout=300, check=True).stdout
    lines = out.split("\n")
    assert lines[2] == "(conversation cleared)", out
    r1, r2, r3 = lines[0], lines[1], lines[3]
    assert r1 == ember_generate(q1, 40, chat=True)
    conv = [{"role": "user", "content": q1}, {"role": "assistant", "content": r1}, {"role": "user", "content": q2}]
    want2 = client.chat.completions.create(model="", temperature=0, max_tokens=40, messages=conv)
    assert r2 == want2.choices[0].message.content
    assert r3 == ember_generate(q3, 40, chat=True)  # after /reset: a fresh conversation
    assert "not read" not in out


def test_ctrl_c_stops_the_reply_not_the_program():
    need_smollm2()
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(EMBER, [EMBER, "chat", "-m", SMOLLM2, "--device", "cpu", "-n", "400"])
    buf = b""
    reaped = False

    def read_until(pred, timeout=120):
        nonlocal buf
        t0 = time.time()
        while not pred(buf) and time.time() - t0 < timeout:
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                try:
                    buf += os.read(fd, 4096)
                except OSError:
                    break
        return pred(buf)

    try:
        assert read_until(lambda b: b"> " in b)
        os.write(fd, b"Count from 1 to 300, separated by commas.\r")
        start = len(buf)
        assert read_until(lambda b: len(b) > start + 60)  # the reply is streaming
        os.write(fd, b"\x03")  # Ctrl-C
        assert read_until(lambda b: b"[stopped]" in b)
        os.write(fd, b"Say hi.\r")
        mark = len(buf)
        assert read_until(lambda b: b.count(b"> ", mark) >= 1 and len(b) > mark + 10)  # still answering
        os.write(fd, b"/exit\r")
        _, status = os.waitpid(pid, 0)
        reaped = True
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    finally:
        if not reaped:  # only our own child, and only while it is not reaped
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)
