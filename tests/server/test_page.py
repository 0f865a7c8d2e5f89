# The web chat page at / in headless Chromium (Debian chromium + chromium-driver, PyPI selenium): it loads from the
# server alone, streams a reply with tokens/s, the stop button ends the stream (and the server frees the sequence),
# a second message gets a whole reply. Screenshots go to build/server-tests/.
import shutil
import time

import pytest

from conftest import OUT


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service
    drv = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not shutil.which("chromium") and not shutil.which("chromium-browser"):
        pytest.skip("chromium is not installed (scripts/test-server.sh installs it)")
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,800"):
        opts.add_argument(a)
    b = webdriver.Chrome(service=Service(drv), options=opts)
    b.set_page_load_timeout(60)
    yield b
    b.quit()


def wait_for(cond, timeout=120, what=""):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_chat_page_streams_and_stops(browser, server):
    from selenium.webdriver.common.by import By
    b = browser
    b.get(server.url + "/")
    assert b.title == "ember chat"
    wait_for(lambda: "SmolLM2" in b.find_element(By.ID, "model").text, 30, "the model name")

    def set_field(id_, value):
        el = b.find_element(By.ID, id_)
        el.clear()
        el.send_keys(str(value))

    set_field("temperature", 0)
    set_field("max_tokens", 400)
    b.find_element(By.ID, "input").send_keys("Count from 1 to 200, separated by commas.")
    b.find_element(By.ID, "send").click()
    reply = lambda: b.find_elements(By.CSS_SELECTOR, ".msg.assistant .content")
    wait_for(lambda: reply() and len(reply()[-1].text) > 20, 120, "streamed text")
    wait_for(lambda: "tok/s" in b.find_element(By.ID, "stats").text and
             not b.find_element(By.ID, "stats").text.startswith("0 "), 60, "tokens/s")
    assert b.find_element(By.ID, "stop").is_enabled() and not b.find_element(By.ID, "send").is_enabled()
    partial = reply()[-1].text
    OUT.mkdir(parents=True, exist_ok=True)
    b.save_screenshot(str(OUT / "chat-streaming.png"))
    b.find_element(By.ID, "stop").click()
    meta = lambda: b.find_elements(By.CSS_SELECTOR, ".msg.assistant .meta")[-1].text
    wait_for(lambda: "stopped" in meta(), 30, "the stopped mark")
    assert b.find_element(By.ID, "send").is_enabled() and not b.find_element(By.ID, "stop").is_enabled()
    stopped_text = reply()[-1].text
    assert stopped_text.startswith(partial[:10])
    time.sleep(0.5)
    assert reply()[-1].text == stopped_text  # nothing arrives after the stop
    m = server.idle_metrics(timeout=30)  # the server saw the disconnect and freed the sequence
    assert m["ember_active_sequences"] == 0
    # A second message: a short whole reply, with the stats of a finished stream.
    set_field("max_tokens", 12)
    b.find_element(By.ID, "system").send_keys("You are brief.")
    b.find_element(By.ID, "input").send_keys("Say hello.")
    b.find_element(By.ID, "send").click()
    wait_for(lambda: "finish:" in meta(), 120, "the finished reply")
    assert len(reply()) == 2 and reply()[-1].text.strip()
    assert "tok/s" in meta()
    b.save_screenshot(str(OUT / "chat.png"))
    # Everything the page loaded came from this server.
    urls = b.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert urls and all(u.startswith(server.url) for u in urls), urls


def test_chat_page_renders_the_reasoning_apart(browser, qwen35_dir):
    # The Qwen3.5 fixture with the real template: with "Thinking" on, the prompt opens <think>, so the reply streams as
    # reasoning_content, which the page shows in its own block; with it off, the reply is content and has no block.
    from selenium.webdriver.common.by import By
    from conftest import Server
    s = Server(qwen35_dir, name="server-page-qwen35")
    try:
        b = browser
        b.get(s.url + "/")
        wait_for(lambda: b.find_element(By.ID, "model").text not in ("", "…"), 30, "the model name")
        for id_, value in (("temperature", 0), ("max_tokens", 12)):
            el = b.find_element(By.ID, id_)
            el.clear()
            el.send_keys(str(value))
        meta = lambda: b.find_elements(By.CSS_SELECTOR, ".msg.assistant .meta")[-1].text
        bubbles = lambda: b.find_elements(By.CSS_SELECTOR, ".msg.assistant")
        b.find_element(By.ID, "input").send_keys("Why is the sky blue?")
        b.find_element(By.ID, "send").click()
        wait_for(lambda: bubbles() and "finish:" in meta(), 120, "the reply with thinking")
        first = bubbles()[-1]
        blocks = first.find_elements(By.CSS_SELECTOR, "details.reasoning div")
        assert len(blocks) == 1 and blocks[0].get_attribute("textContent")
        assert first.find_element(By.CSS_SELECTOR, ".content").get_attribute("textContent") == ""
        OUT.mkdir(parents=True, exist_ok=True)
        b.save_screenshot(str(OUT / "chat-reasoning.png"))
        b.find_element(By.ID, "thinking").click()  # off: enable_thinking false
        b.find_element(By.ID, "input").send_keys("Why is the sky blue?")
        b.find_element(By.ID, "send").click()
        wait_for(lambda: len(bubbles()) == 2 and "finish:" in meta(), 120, "the reply without thinking")
        second = bubbles()[-1]
        assert not second.find_elements(By.CSS_SELECTOR, "details.reasoning")
        assert second.find_element(By.CSS_SELECTOR, ".content").get_attribute("textContent")
    finally:
        assert s.stop() == 0
