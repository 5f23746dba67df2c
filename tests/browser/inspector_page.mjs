// Drives the inspector page in headless Chromium for tests/inspector_page.rs.
//
// usage: node inspector_page.mjs PAGE_URL LOCK HOSTILE_LOCK HOLDER_FIELD SHOT_DIR KINDS
// (KINDS: a JSON object of other held locks' names and the kinds the list must show)
//
// A line protocol with the test: this script prints a step's name on stdout when the page
// shows it, and reads what the test did meanwhile from stdin:
//   listed        both locks and KINDS' are in the list (with their kinds), the hostile
//                 name as plain text
//   detail        LOCK's detail is open, shows HOLDER_FIELD, and is live (server-sent events)
//   < waiter F    the test queued a fair-lock waiter F
//   waiter-seen   the detail shows waiter F, the list a fair lock with one waiter (a
//                 screenshot is saved: `screenshot PATH`)
//   forced        force-unlocked LOCK after typing its name
//   < granted     the waiter got the lock
//   granted-seen  the detail shows F as the holder
//   < released    the waiter released it
//   gone          LOCK left the list; the detail says it is free
//   hostile-gone  HOSTILE_LOCK's detail opened, it was force-unlocked and left the list
//   done
// On a failure: `fail MESSAGE`, a screenshot `failure.png` in SHOT_DIR, exit status 1.
import { chromium } from 'playwright-core';
import readline from 'node:readline';
import path from 'node:path';

const [pageUrl, lockName, hostileName, holderField, shotDir, kindsJson] = process.argv.slice(2);
const kinds = JSON.parse(kindsJson);
const STEP_MS = 30000;
const input = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

const say = (line) => process.stdout.write(line + '\n');

async function hear(word) {
  const { value, done } = await input.next();
  const got = done ? null : value.trim();
  if (got === null || got.split(' ')[0] !== word) {
    throw new Error(`expected "${word}" from the test, got ${JSON.stringify(got)}`);
  }
  return got.slice(word.length).trim();
}

// Names are compared as text in the page, never put in a selector.
const listed = (names) => [...document.querySelectorAll('#locks tbody a.lock-link')]
  .map((a) => a.textContent);

async function waitListed(page, name, present) {
  await page.waitForFunction(([name, present]) => {
    const names = [...document.querySelectorAll('#locks tbody a.lock-link')].map((a) => a.textContent);
    return names.includes(name) === present;
  }, [name, present], { timeout: STEP_MS });
}

async function openDetail(page, name) {
  const index = await page.evaluate(listed);
  const at = index.indexOf(name);
  if (at < 0) throw new Error(`${JSON.stringify(name)} is not listed: ${JSON.stringify(index)}`);
  await page.locator('#locks tbody a.lock-link').nth(at).click();
  await page.waitForFunction((name) => document.getElementById('detail-name').textContent === name
    && new URLSearchParams(location.search).get('lock') === name, name, { timeout: STEP_MS });
}

// Waits until the list's row of lock `name` shows `kind` and `waiters` (text of the cells).
async function waitListRow(page, name, kind, waiters) {
  await page.waitForFunction(([name, kind, waiters]) => [...document.querySelectorAll('#locks tbody tr')]
    .some((tr) => tr.dataset.name === name && tr.cells[1].textContent === kind.replace('_', ' ')
      && (waiters === null || tr.cells[5].textContent === waiters)), [name, kind, waiters],
  { timeout: STEP_MS });
}

// Waits until a row of table `table` has a cell whose title (the full field) is `field`.
async function waitRow(page, table, field) {
  await page.waitForFunction(([table, field]) => [...document.querySelectorAll(`#${table} tbody td`)]
    .some((td) => td.title === field), [table, field], { timeout: STEP_MS });
}

async function forceUnlock(page, name) {
  await page.click('#force-open');
  const submit = page.locator('#force-submit');
  if (!(await submit.isDisabled())) throw new Error('force-unlock is enabled before the name is typed');
  await page.fill('#force-confirm', name.slice(0, -1));
  if (!(await submit.isDisabled())) throw new Error('force-unlock is enabled with a partial name');
  await page.fill('#force-confirm', name);
  await submit.click({ timeout: STEP_MS });
  await page.locator('#force-result').filter({ hasText: 'Released' }).waitFor({ timeout: STEP_MS });
  const shown = await page.locator('#force-result .name').textContent();
  if (shown !== name) throw new Error(`the result names ${JSON.stringify(shown)}, not ${JSON.stringify(name)}`);
}

async function checkNothingInjected(page, problems) {
  const injected = await page.evaluate(() => document.querySelectorAll('img, iframe, object, embed').length);
  if (injected) problems.push(`${injected} element(s) injected by a name`);
  if (problems.length) throw new Error(problems.join('; '));
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
});
const page = await browser.newPage({ viewport: { width: 1440, height: 760 }, deviceScaleFactor: 1 });
const problems = [];
page.on('dialog', (dialog) => { problems.push('a dialog opened: ' + dialog.message()); dialog.dismiss(); });
page.on('pageerror', (error) => problems.push('script error: ' + error.message));
page.on('console', (message) => {
  if (message.type() === 'error') problems.push('console error: ' + message.text());
});
page.on('response', (response) => {
  if (response.status() >= 400) problems.push(`HTTP ${response.status()} for ${response.url()}`);
});
let status = 0;
try {
  await page.goto(pageUrl);
  await waitListed(page, lockName, true);
  await waitListed(page, hostileName, true);
  for (const [name, kind] of Object.entries(kinds)) await waitListRow(page, name, kind, null);
  await checkNothingInjected(page, problems);
  say('listed');

  await openDetail(page, lockName);
  await waitRow(page, 'holders', holderField);
  await page.waitForFunction(() => document.getElementById('live').textContent === 'live', null, { timeout: STEP_MS });
  say('detail');

  const waiterField = await hear('waiter');
  await waitRow(page, 'waiters', waiterField);
  await waitListRow(page, lockName, 'fair', '1');
  await page.mouse.move(0, 0); // no hover underline in the picture
  const shot = path.join(shotDir, 'inspector-page.png');
  await page.screenshot({ path: shot });
  say('screenshot ' + shot);
  say('waiter-seen');

  await forceUnlock(page, lockName);
  say('forced');

  await hear('granted');
  await waitRow(page, 'holders', waiterField);
  say('granted-seen');

  await hear('released');
  await waitListed(page, lockName, false);
  await page.locator('#detail-missing').waitFor({ state: 'visible', timeout: STEP_MS });
  say('gone');

  await openDetail(page, hostileName);
  await page.waitForFunction(() => document.querySelectorAll('#holders tbody tr').length === 1, null, { timeout: STEP_MS });
  await forceUnlock(page, hostileName);
  await waitListed(page, hostileName, false);
  await checkNothingInjected(page, problems);
  say('hostile-gone');
  say('done');
} catch (error) {
  status = 1;
  console.error(error);
  // The screenshot first: the test stops this script as soon as it reads `fail`.
  try {
    const shot = path.join(shotDir, 'failure.png');
    await page.screenshot({ path: shot });
    console.error('failure screenshot: ' + shot);
  } catch (_) { /* the browser is gone */ }
  say('fail ' + String(error && error.message ? error.message : error).split('\n')[0]);
} finally {
  await browser.close();
}
process.exit(status);
