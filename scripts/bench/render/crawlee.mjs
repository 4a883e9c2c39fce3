// The Crawlee side of scripts/bench/render/compare.sh: spiders/bbs-rendered.toml
// written as a Crawlee PuppeteerCrawler, crawling the demo forum's
// JavaScript-built section (/js/) in the system's Chromium.
//
// compare.sh copies this file next to its node_modules (installed from
// package.json outside the repository) and runs it with:
//
//   BASE      the demo server, e.g. http://127.0.0.1:18702
//   TASKS     the start tasks, a JSON array: [{"forum_id":"00001","max_page":5}, ...]
//   ITEMS     where the items go, one JSON object a line
//   STATS     where a JSON summary of the run goes (pages, failures, ...)
//   CHROMIUM  the browser (default /usr/bin/chromium)
//   TABS      pages rendered at once (default 4, crawlworker's render_pages)
//   PROFILE   "matched" (default): the settings below; "defaults": Crawlee's
//             own defaults for fingerprints, browser retirement and session
//             rotation (the three settings marked [matched] below)
//   AUTOSCALE 1: leave minConcurrency at Crawlee's default (1), so that the
//             autoscaled pool decides how many of the TABS tabs it uses
//
// What each page does, as the spider's rules say (crawlworker's defaults in
// brackets):
//   - navigation waits for the load event (page.goto's default waitUntil),
//     then the network idle: 500 ms with no request in flight [render =
//     true: load event, then network idle 500 ms];
//   - list pages: then scroll to the end and wait for the network idle
//     again, which loads the second half of the threads [scroll = 1];
//   - post pages: then wait for h1.post-title [wait_for];
//   - images, fonts and media are never loaded [render's default block].
//
// Crawlee settings that differ from its defaults, and why:
//   - minConcurrency = maxConcurrency = TABS: the autoscaled pool otherwise
//     starts at 1 page at a time and adds at most one every 10 s
//     (autoscaleIntervalSecs), and only while its system status says CPU,
//     memory and event loop are not overloaded: in this ~30 s crawl it
//     would have 4 tabs open only near the end (AUTOSCALE=1 shows it).
//     With minConcurrency = 4 the system status is not consulted below 4
//     (its snapshots are still taken, every second, each spawning `ps`).
//   - [matched] browserPoolOptions.useFingerprints = false: by default
//     every page gets a generated fingerprint (user agent, screen,
//     headers) injected by scripts; crawlworker does nothing of the kind.
//   - [matched] browserPoolOptions.retireBrowserAfterPageCount = 1000:
//     Crawlee's default (100) would start a second Chromium after 100 of
//     the 103 pages; crawlworker's render_restart_pages is 1000.
//   - [matched] sessionPoolOptions.sessionOptions.maxUsageCount = 1000: a
//     browser is tied to a session of the session pool, and retired with
//     it; by default a session retires after 50 uses, and its browser
//     with it: Crawlee would start a new Chromium during this crawl.
//   - respectRobotsTxtFile = true: crawlworker's spider obeys robots.txt
//     (robotstxt_obey = true), so both fetch it once.
//   - page.emulateFocusedPage(true) before each navigation (see the hook
//     below): without it Crawlee finds 72 pages and 163 items, not 103/243.
//   - persistStorage = false: the request queue and dataset live in memory
//     (nothing written to disk); the storage folder is a temporary one.
import { writeFileSync } from 'node:fs';
import { PuppeteerCrawler, Configuration, log, utils } from 'crawlee';
import puppeteer from 'puppeteer-core';

const BASE = required('BASE');
const TASKS = JSON.parse(required('TASKS'));
const ITEMS = required('ITEMS');
const STATS = required('STATS');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const TABS = Number(process.env.TABS || 4);
const PROFILE = process.env.PROFILE || 'matched';
const AUTOSCALE = process.env.AUTOSCALE === '1';
if (!['matched', 'defaults'].includes(PROFILE)) {
    console.error(`crawlee.mjs: PROFILE is matched or defaults, not ${PROFILE}`);
    process.exit(2);
}
// The [matched] settings, or nothing (Crawlee's defaults).
const matched = PROFILE === 'matched';

// The kinds crawlworker blocks by default (image, font, media), as URL
// patterns: Crawlee's blockRequests sets Chromium's blocked URLs
// (Network.setBlockedURLs), which match URLs, not resource types. Not
// '.css' (Crawlee's default list has it; crawlworker loads stylesheets).
const BLOCKED = [
    '.jpg', '.jpeg', '.png', '.gif', '.svg', '.webp', '.avif', '.ico',
    '.woff', '.woff2', '.ttf', '.otf',
    '.mp4', '.webm', '.mp3', '.ogg', '.wav',
];

const NETWORK_IDLE = { idleTime: 500 };

function required(name) {
    const value = process.env[name];
    if (!value) {
        console.error(`crawlee.mjs: ${name} is not set`);
        process.exit(2);
    }
    return value;
}

log.setLevel(log.LEVELS.WARNING);

const config = new Configuration({ persistStorage: false, purgeOnStart: true });

let browsers = 0;
// Tabs open: the most at once, and the time-weighted sum (tab-seconds),
// to show how many of its TABS the crawler kept busy.
const tabs = {
    open: 0,
    max: 0,
    tabSeconds: 0,
    since: Date.now(),
    change(by) {
        const now = Date.now();
        this.tabSeconds += (this.open * (now - this.since)) / 1000;
        this.since = now;
        this.open += by;
        this.max = Math.max(this.max, this.open);
    },
};

// The page number of a list page's URL, as the spider's `paginate` reads it.
const listPage = (url) => Number(/\/list\/\d+\/(\d+)/.exec(url)?.[1]);

const crawler = new PuppeteerCrawler(
    {
        launchContext: {
            launcher: puppeteer,
            launchOptions: {
                executablePath: CHROMIUM,
                headless: true,
                // As root (a container), Chromium's sandbox cannot start;
                // crawlworker adds the same flag then.
                args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
            },
        },
        minConcurrency: AUTOSCALE ? undefined : TABS,
        maxConcurrency: TABS,
        respectRobotsTxtFile: true,
        navigationTimeoutSecs: 30,
        requestHandlerTimeoutSecs: 30,
        browserPoolOptions: {
            ...(matched ? { useFingerprints: false, retireBrowserAfterPageCount: 1000 } : {}),
            // Counts the Chromium starts, and the tabs open over time, for
            // the report.
            postLaunchHooks: [() => { browsers += 1; }],
            postPageCreateHooks: [() => tabs.change(+1)],
            postPageCloseHooks: [() => tabs.change(-1)],
        },
        sessionPoolOptions: matched ? { sessionOptions: { maxUsageCount: 1000 } } : {},
        preNavigationHooks: [
            async ({ page }) => {
                // Every tab behaves as the focused one, as crawlworker's do
                // (Emulation.setFocusEmulationEnabled): without it only the
                // tab in front gets animation frames, so the list pages'
                // IntersectionObserver never fires in the 3 others and
                // their second half of threads never loads.
                await page.emulateFocusedPage(true);
                await utils.puppeteer.blockRequests(page, { urlPatterns: BLOCKED });
            },
        ],
        async requestHandler({ page, request, crawler: self }) {
            // The load event has fired (goto); now the network quiet.
            await page.waitForNetworkIdle(NETWORK_IDLE);
            const { forum_id: forumId, max_page: maxPage } = request.userData;
            if (request.label === 'LIST') {
                // The rest of the threads load when the list's end scrolls
                // into view.
                await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
                await page.waitForNetworkIdle(NETWORK_IDLE);
                const { threads, next } = await page.evaluate(() => ({
                    threads: [...document.querySelectorAll('ul.threads a.title')].map((a) => a.href),
                    next: document.querySelector('div.pager a.next')?.href ?? null,
                }));
                const requests = threads.map((url) => ({
                    url,
                    label: 'POST',
                    userData: { forum_id: forumId },
                }));
                // Posts first (the spider gives them priority 10).
                await self.addRequests(requests, { forefront: true });
                if (next && listPage(next) <= maxPage) {
                    await self.addRequests([
                        { url: next, label: 'LIST', userData: { forum_id: forumId, max_page: maxPage } },
                    ]);
                }
            } else if (request.label === 'POST') {
                await page.waitForSelector('h1.post-title');
                const { post, comments } = await page.evaluate(extractPost);
                await self.pushData({
                    kind: 'post',
                    post_id: Number(/\/post\/(\d+)/.exec(request.url)[1]),
                    forum_id: forumId,
                    ...post,
                    url: request.loadedUrl ?? request.url,
                });
                if (comments) {
                    await self.addRequests(
                        [{ url: comments, label: 'COMMENT', userData: { forum_id: forumId } }],
                        { forefront: true },
                    );
                }
            } else if (request.label === 'COMMENT') {
                const { comments, next } = await page.evaluate(extractComments);
                const postId = Number(/\/comment\/(\d+)\//.exec(request.url)[1]);
                await self.pushData(
                    comments.map((c) => ({
                        kind: 'comment',
                        comment_id: c.comment_id,
                        post_id: postId,
                        forum_id: forumId,
                        user: c.user,
                        floor: c.floor,
                        text: c.text,
                    })),
                );
                if (next) {
                    await self.addRequests(
                        [{ url: next, label: 'COMMENT', userData: { forum_id: forumId } }],
                        { forefront: true },
                    );
                }
            }
        },
        failedRequestHandler({ request }, error) {
            console.error(`crawlee.mjs: failed ${request.url}: ${error.message}`);
        },
    },
    config,
);

// The post's fields, read in the page with the spider's selectors
// (spiders/bbs-rendered.toml [items.post]); runs in the browser.
function extractPost() {
    const $ = (css) => document.querySelector(css);
    // `::text`: the element's own text nodes (the first match's).
    const ownText = (el) =>
        el
            ? [...el.childNodes]
                  .filter((n) => n.nodeType === Node.TEXT_NODE)
                  .map((n) => n.textContent)
                  .join('')
                  .trim()
            : null;
    const normalize = (s) => s.split(/\s+/).filter(Boolean).join(' ');
    const views = /([\d,]+)/.exec(ownText($('span.views')) ?? '');
    const body = $('div.post-body');
    return {
        post: {
            title: ownText($('h1.post-title')),
            author: ownText($('div.meta span.author')),
            posted: $('time.posted')?.getAttribute('datetime') ?? null,
            views: views ? Number(views[1].replace(/,/g, '')) : 0,
            // ` ::text`: every text node below, joined, whitespace normalized.
            body: body ? normalize(body.textContent) : null,
        },
        comments: $('a.comments')?.href ?? null,
    };
}

// A comment page's comments and next link (spiders/bbs-rendered.toml
// [items.comment]); runs in the browser.
function extractComments() {
    const ownText = (el) =>
        el
            ? [...el.childNodes]
                  .filter((n) => n.nodeType === Node.TEXT_NODE)
                  .map((n) => n.textContent)
                  .join('')
                  .trim()
            : null;
    const normalize = (s) => s.split(/\s+/).filter(Boolean).join(' ');
    const comments = [...document.querySelectorAll('div.comments div.comment')].map((c) => {
        const floor = /(\d+)/.exec(ownText(c.querySelector('span.floor')) ?? '');
        const text = c.querySelector('p.text');
        return {
            comment_id: c.getAttribute('data-id'),
            user: ownText(c.querySelector('span.user')),
            floor: floor ? Number(floor[1]) : null,
            text: text ? normalize(text.textContent) : null,
        };
    });
    return { comments, next: document.querySelector('div.pager a.next')?.href ?? null };
}

const started = Date.now();
tabs.since = started;
const final = await crawler.run(
    TASKS.map((task) => ({
        url: `${BASE}/js/list/${task.forum_id}/1`,
        label: 'LIST',
        userData: { forum_id: task.forum_id, max_page: task.max_page },
    })),
);
const { items } = await crawler.getData();
writeFileSync(ITEMS, items.map((item) => JSON.stringify(item) + '\n').join(''));
writeFileSync(
    STATS,
    JSON.stringify({
        pages: final.requestsFinished,
        failed: final.requestsFailed,
        retries: final.retryHistogram,
        items: items.length,
        browsers,
        tabs_max: tabs.max,
        tabs_mean: tabs.tabSeconds / ((Date.now() - started) / 1000),
        seconds: (Date.now() - started) / 1000,
    }) + '\n',
);
