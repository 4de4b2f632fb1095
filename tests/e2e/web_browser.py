"""A person in headless Chromium (Selenium, chromium-driver) using the web UI with tokens on.

web_browser.py WEB_URL CLIENT_TOKEN AGENT_TOKEN JOB_ID OUT_DIR

Opens a page without a session (401, a link to log in), logs in with a wrong token and with an
agent's token (refused, no cookie), logs in with the client token (a session cookie the page's
script cannot read: HttpOnly, Secure, SameSite=Strict, not the token), browses the jobs list, a
queued job's page (its pending reason shown) and the agents page by clicking, logs out, and finds
the next page refused. No URL visited and no page shown holds a token. Prints one line per step;
exits 1 naming the step that failed.
"""

import sys

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

web, client_token, agent_token, job_id, out = sys.argv[1:6]
seen_urls = []
seen_pages = []


def fail(step, detail=""):
    print(f"web_browser FAILED: {step}{': ' + detail[:300] if detail else ''}")
    sys.exit(1)


def visit(driver, url=None):
    if url:
        driver.get(url)
    seen_urls.append(driver.current_url)
    seen_pages.append(driver.page_source)
    return driver.page_source


def click_and_load(driver, element):
    """Clicks a link or a form's button and waits until the answer replaced the page: a click does not wait
    for the navigation it starts, and reading the URL before it ends reads the old page."""
    element.click()

    def replaced(_):
        # Chromium answers a node of the page being replaced either as stale or, mid-navigation, with
        # "Node with given id does not belong to the document": both mean the old page is gone.
        try:
            element.is_enabled()
            return False
        except StaleElementReferenceException:
            return True
        except WebDriverException as e:
            if "does not belong to the document" in str(e):
                return True
            raise

    try:
        WebDriverWait(driver, 20).until(replaced)
    except WebDriverException as e:
        fail("the next page did not load within 20 s", str(e))
    return visit(driver)


def log_in(driver, token):
    visit(driver, web + "/login")
    field = driver.find_element(By.NAME, "token")
    field.clear()
    field.send_keys(token)
    return click_and_load(driver, driver.find_element(By.XPATH, "//form[@action='/login']//button"))


opts = Options()
opts.binary_location = "/usr/bin/chromium"
for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,900",
            "--ignore-certificate-errors",  # the test's throwaway CA is not in the browser's store
            "--disable-dev-shm-usage"):
    opts.add_argument(arg)
try:
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
except WebDriverException as e:
    fail("Chromium did not start", str(e))
driver.set_page_load_timeout(20)
try:
    page = visit(driver, web + "/jobs")
    if "a client token is required" not in page:
        fail("a page without a session was not refused", page)
    click_and_load(driver, driver.find_element(By.LINK_TEXT, "Log in"))
    if not driver.current_url.endswith("/login"):
        fail("the refusal's Log in link", driver.current_url)
    print("browser: a page without a session is refused, with a link to log in")

    page = log_in(driver, "wrong-" + client_token[:8])
    if "Client token" not in page or driver.get_cookies():
        fail("a wrong token was not refused on the login page", page)
    page = log_in(driver, agent_token)
    if driver.get_cookies() or "/jobs" in driver.current_url:
        fail("an agent's token logged in", page)
    print("browser: a wrong token and an agent's token are refused; no cookie set")

    page = log_in(driver, client_token)
    if not driver.current_url.endswith("/jobs") or job_id not in page:
        fail("the client token did not lead to the jobs list", driver.current_url)
    cookies = driver.get_cookies()
    if len(cookies) != 1:
        fail("expected one session cookie", str([c.get("name") for c in cookies]))
    c = cookies[0]
    if not c.get("httpOnly") or not c.get("secure") or c.get("sameSite") != "Strict":
        fail("the session cookie's attributes", str({k: c.get(k) for k in ("httpOnly", "secure", "sameSite")}))
    if client_token in c.get("value", ""):
        fail("the session cookie holds the token")
    if driver.execute_script("return document.cookie") != "":
        fail("the page's script can read the session cookie")
    driver.save_screenshot(out + "/jobs-logged-in.png")
    print("browser: logged in; one session cookie, HttpOnly, Secure, SameSite=Strict, not the token")

    page = click_and_load(driver, driver.find_element(By.LINK_TEXT, job_id))
    if job_id not in driver.current_url or "waiting" not in page.lower():
        fail("the queued job's page does not say why it waits", page)
    page = click_and_load(driver, driver.find_element(By.LINK_TEXT, "Agents"))
    if not driver.current_url.endswith("/agents") or "<h1>Agents</h1>" not in page:
        fail("the agents page", driver.current_url)
    print(f"browser: browsed the jobs list, {job_id} (its pending reason shown) and the agents page")

    click_and_load(driver, driver.find_element(By.LINK_TEXT, "Log in / out"))
    click_and_load(driver, driver.find_element(By.XPATH, "//form[@action='/logout']//button"))
    if not driver.current_url.endswith("/login"):
        fail("logging out did not return to the login page", driver.current_url)
    page = visit(driver, web + "/jobs")
    if "log in" not in page.lower() or job_id in page:
        fail("a page was served after logging out", page)
    print("browser: logged out; the next page is refused")

    for token in (client_token, agent_token):
        if any(token in u for u in seen_urls):
            fail("a token appeared in a URL")
        if any(token in p for p in seen_pages):
            fail("a token appeared in a page")
    print(f"browser: no token in any of {len(seen_urls)} URLs or pages visited")
finally:
    driver.quit()
