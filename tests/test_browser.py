"""Real browser checks: headless Chromium (Debian's `chromium` + `chromium-driver`, driven by selenium)
opens the Snakemake report and `mlflow ui` on the smoke store. Screenshots go to test-artifacts/."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from reportlib import ARTIFACTS, SCALE, build_report, data_bytes, landed_studies, parse_report

pytestmark = pytest.mark.slow

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=2000,1000"]


def _install_chromium() -> None:
    """Debian's chromium + chromium-driver, installed here when missing; skip only without apt-get."""
    if Path(CHROMIUM).exists() and Path(DRIVER).exists():
        return
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        pytest.skip("apt-get is unavailable (or not root): cannot install Debian's chromium and "
                    "chromium-driver for the browser tests")
    cmd = [apt, "install", "-y", "-q", "--no-install-recommends", "chromium", "chromium-driver"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.run(cmd, capture_output=True, env=env).returncode != 0:
        subprocess.run([apt, "update", "-q"], capture_output=True, env=env)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        assert proc.returncode == 0, f"apt-get install chromium chromium-driver failed:\n{proc.stderr[-2000:]}"


def _selenium():
    try:
        import selenium  # noqa: F401
    except ImportError:  # the [test] extra should have it; install it rather than skip
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "selenium"], capture_output=True, text=True)
        assert proc.returncode == 0, f"selenium is missing and `pip install selenium` failed:\n{proc.stderr[-2000:]}"
    from selenium import webdriver

    return webdriver


@pytest.fixture(scope="module")
def browser():
    _install_chromium()
    webdriver = _selenium()
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    for flag in FLAGS + [f"--user-data-dir={profile}"]:
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.set_page_load_timeout(120)
    ARTIFACTS.mkdir(exist_ok=True)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _wait(pred, timeout: float, what: str, step: float = 0.5):
    end = time.time() + timeout
    while time.time() < end:
        try:
            got = pred()
        except Exception:  # element not there yet, stale, ...
            got = None
        if got:
            return got
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _body(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


def _click_link(driver, text: str) -> None:
    from selenium.webdriver.common.by import By

    _wait(lambda: driver.find_element(By.XPATH, f"//a[normalize-space(.)='{text}']"), 20, f"link {text!r}").click()
    time.sleep(0.5)


def _open_result(driver, item: str) -> None:
    """Click a result row's eye (view) and info buttons, as a reader does."""
    from selenium.webdriver.common.by import By

    row = f"//tr[td[normalize-space(.)='{item}']]"
    _wait(lambda: driver.find_elements(By.XPATH, row + "//a"), 20, f"result row {item!r}")[0].click()
    time.sleep(0.8)
    driver.find_elements(By.XPATH, row + "//a")[-1].click()
    time.sleep(0.8)


# ---- the Snakemake report ---------------------------------------------------------------------------------

def test_report_in_chromium(smoke_tree, browser):
    from selenium.webdriver.common.by import By

    report = build_report(smoke_tree)
    parsed = parse_report(report)
    browser.get(report.as_uri())
    _wait(lambda: "results" in _body(browser).lower(), 60, "the report to render")  # CSS may upper-case it
    for name in landed_studies():
        claims = json.loads((smoke_tree / "results" / SCALE / "tables" / f"{name}.claims.json").read_text())["claims"]
        browser.get(report.as_uri())
        # with one category Snakemake's menu has a "Results" link; with several, a heading above them
        if browser.find_elements(By.XPATH, "//a[normalize-space(.)='Results']"):
            _click_link(browser, "Results")
        _click_link(browser, name)
        # a study with figures has "table" and "figures" subcategories; one without lists its table directly
        if browser.find_elements(By.XPATH, "//a[normalize-space(.)='table']"):
            _click_link(browser, "table")
        _open_result(browser, "table and claims")
        body = _wait(lambda: "DESCRIPTION" in _body(browser).upper() and _body(browser), 20, "the caption")
        assert "Stand-ins at this scale" in body and all(c["verdict"] in body for c in claims)
        frame = _wait(lambda: browser.find_element(By.TAG_NAME, "iframe"), 20, "the table page")
        browser.switch_to.frame(frame)
        page = _body(browser)
        browser.switch_to.default_content()
        assert "Results" in page and "Claims" in page and claims[0]["claim"] in page
        browser.save_screenshot(str(ARTIFACTS / f"report_{name}_table.png"))

        # one study's figure is opened by hand (Snakemake lays out a category's results as rows or as an
        # item x label matrix depending on their labels); every figure's bytes are checked in test_report.py
        figures = parsed["categories"][name].get("figures", []) if name == "sand" else []
        if figures:
            first = parsed["results"][sorted(figures)[0]]
            _click_link(browser, name)
            _click_link(browser, "figures")
            _open_result(browser, first["labels"]["item"])
            img = _wait(lambda: [i for i in browser.find_elements(By.TAG_NAME, "img")
                                 if (i.get_attribute("src") or "").startswith("data:image/png")], 20, "the figure")
            assert browser.execute_script("return arguments[0].naturalWidth", img[0]) > 200
            assert data_bytes(img[0].get_attribute("src")) == data_bytes(first["data_uri"])
            browser.save_screenshot(str(ARTIFACTS / f"report_{name}_figure.png"))
    assert (ARTIFACTS / "report_sand_table.png").stat().st_size > 10_000


# ---- the MLflow UI ----------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mlflow_ui(smoke_tree):
    """`mlflow ui` on the smoke store (as the README says), on 127.0.0.1 and a free port; 20-90 s to start."""
    port = _free_port()
    exe = Path(sys.executable).with_name("mlflow")
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "mlflow_ui.log", "w")
    proc = subprocess.Popen([str(exe), "ui", "--backend-store-uri", f"sqlite:///{smoke_tree / 'mlflow.db'}",
                             "--host", "127.0.0.1", "--port", str(port)], cwd=smoke_tree, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    t0 = time.time()
    try:
        def up():
            assert proc.poll() is None, f"mlflow ui exited with {proc.returncode}; see {log.name}"
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                return r.status == 200

        _wait(up, 240, "mlflow ui to answer /health", step=1)
        print(f"mlflow ui up in {time.time() - t0:.0f} s")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and its workers: the group we started
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def test_mlflow_ui_lists_runs_with_metrics(smoke_tree, browser, mlflow_ui):
    from mlflow.tracking import MlflowClient
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    client = MlflowClient(tracking_uri=f"sqlite:///{smoke_tree / 'mlflow.db'}")
    name = "sand" if "sand" in landed_studies() else landed_studies()[0]
    exp = client.get_experiment_by_name(f"{SCALE}/{name}")
    runs = client.search_runs([exp.experiment_id])
    run_names = sorted(r.info.run_name for r in runs)
    common = sorted(set.intersection(*(set(r.data.metrics) for r in runs)))
    metrics = [m for m in common if m.endswith("/test_metric")][:3] or common[:1]

    # the experiment list, then the experiment, as a reader navigates
    browser.get(mlflow_ui + "/#/experiments")
    link = f"//a[normalize-space(.)='{SCALE}/{name}']"
    _wait(lambda: browser.find_element(By.XPATH, link), 120, f"experiment {SCALE}/{name} in the list")
    modes = browser.find_elements(By.XPATH, "//*[normalize-space(text())='Model training']")
    if modes:  # MLflow 3 opens in GenAI mode (an experiment opens on traces); runs are under "Model training"
        modes[0].click()
        time.sleep(1)
    _wait(lambda: browser.find_element(By.XPATH, link), 30, "the experiment link").click()
    _wait(lambda: all(n in _body(browser) for n in run_names), 90, f"the runs {run_names}")
    for close in browser.find_elements(
            By.XPATH, "//*[normalize-space(text())='MLflow Assistant']/ancestor::*[.//button][1]//button[@aria-label='Close']"):
        close.click()  # the assistant side panel hides the run table's right half
    # MLflow 3 hides metric columns when an experiment has many: add them through "Columns"
    search = "//input[@placeholder='Search columns']"
    for metric in metrics:
        if not [e for e in browser.find_elements(By.XPATH, search) if e.is_displayed()]:
            _wait(lambda: browser.find_element(By.XPATH, "//button[normalize-space(.)='Columns']"), 20,
                  "Columns").click()
        box = _wait(lambda: browser.find_element(By.XPATH, search), 20, "the column search box")
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(Keys.BACKSPACE)
        box.send_keys(metric)
        _wait(lambda: browser.find_element(By.XPATH, f"//*[normalize-space(text())='{metric}']"), 20,
              f"column {metric}").click()
        time.sleep(0.5)
        box.send_keys(Keys.ESCAPE)
        time.sleep(0.5)
    browser.execute_script(  # the grid renders only the columns in view: scroll to the metric columns
        "document.querySelectorAll('.ag-body-horizontal-scroll-viewport, .ag-center-cols-viewport, "
        ".ag-header-viewport').forEach(e => e.scrollLeft = e.scrollWidth)")

    def cells(metric):
        vals = [c.text.strip() for c in browser.find_elements(By.CSS_SELECTOR, f".ag-cell[col-id='metrics.`{metric}`']")]
        nums = [v for v in vals if re.fullmatch(r"-?\d+(\.\d+)?(e-?\d+)?", v)]
        return nums if len(nums) == len(runs) else None

    for metric in metrics:
        shown = _wait(lambda: cells(metric), 30, f"a {metric} value for each of the {len(runs)} runs")
        assert sorted(round(float(v), 4) for v in shown) == sorted(round(r.data.metrics[metric], 4) for r in runs)
        header = browser.find_elements(By.CSS_SELECTOR, f".ag-header-cell[col-id='metrics.`{metric}`']")
        assert header and metric in header[0].text
    body = _body(browser)
    assert all(n in body for n in run_names) and f"{len(runs)} matching runs" in body
    browser.save_screenshot(str(ARTIFACTS / f"mlflow_{name}_runs.png"))
