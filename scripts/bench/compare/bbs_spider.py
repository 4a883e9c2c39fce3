"""scrapy-redis equivalent of spiders/bbs.toml, for scripts/bench/compare/run.sh.

Run with `scrapy runspider scripts/bench/compare/bbs_spider.py` (no Scrapy project
needed); everything it needs comes from the environment:

    REDIS_URL        the benchmark's redis (default redis://127.0.0.1:6379)
    BBS_SR_BASE      the demo forum's origin (default http://127.0.0.1:8700)
    BBS_SR_STATS     if set, the worker's final Scrapy stats are written to
                     this file as JSON when the spider closes
    BBS_SR_REDIS_STATS=1  keep the stats in Redis (bbs_sr:stats) with
                     scrapy_redis.stats.RedisStatsCollector instead of in
                     the worker's memory (Scrapy's default collector)

It reads the same JSON tasks as crawlworker, {"forum_id": "...",
"max_page": N}, from the list `bbs_sr:start_urls`, and crawls list pages →
post pages → comment pages exactly as the TOML spider does: the same
selectors, the same priorities, the same items with the same fields in the
same order, forum_id carried in meta, list pages dont_filter and stopped
at max_page. Items go to `bbs_sr:items` through scrapy-redis's
RedisPipeline, requests through its scheduler (priority queue in a zset)
and RFPDupeFilter (a set of SHA-1 fingerprints).
"""

import json
import os
import re
import time

from scrapy import Request, signals
from scrapy_redis.spiders import RedisSpider

BASE = os.environ.get("BBS_SR_BASE", "http://127.0.0.1:8700").rstrip("/")

SETTINGS = {
    # scrapy-redis: shared scheduler queue, dupefilter, items in Redis.
    "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"),
    "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
    "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
    "SCHEDULER_PERSIST": True,
    "ITEM_PIPELINES": {"scrapy_redis.pipelines.RedisPipeline": 300},
    # Leave when idle, so a run ends. MAX_IDLE_TIME_BEFORE_CLOSE is checked
    # on Scrapy's spider_idle signal (nothing queued in Redis, nothing
    # downloading or being parsed in this worker); SCHEDULER_IDLE_BEFORE_CLOSE
    # is the blocking-pop timeout of the FIFO/LIFO queues, ignored by the
    # default PriorityQueue used here.
    "MAX_IDLE_TIME_BEFORE_CLOSE": 3,
    "SCHEDULER_IDLE_BEFORE_CLOSE": 1,
    # Like crawlworker's settings for spiders/bbs.toml (robots.txt off on
    # both sides for the benchmark; crawlworker keeps no cookies by default).
    "ROBOTSTXT_OBEY": False,
    "CONCURRENT_REQUESTS": 16,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
    "DOWNLOAD_DELAY": 0,
    "COOKIES_ENABLED": False,
    "DEPTH_PRIORITY": 0,
    "LOG_LEVEL": "WARNING",
    "TELNETCONSOLE_ENABLED": False,
}
if os.environ.get("BBS_SR_REDIS_STATS") == "1":
    SETTINGS["STATS_CLASS"] = "scrapy_redis.stats.RedisStatsCollector"

POST_ID = re.compile(r"/post/(\d+)")
COMMENT_POST_ID = re.compile(r"/comment/(\d+)/")
LIST_PAGE = re.compile(r"/list/\d+/(\d+)")
DIGITS_COMMAS = re.compile(r"([\d,]+)")
DIGITS = re.compile(r"(\d+)")


def strip(value):
    """crawlworker's whitespace = "strip": trim; empty means missing."""
    if value is None:
        return None
    value = value.strip()
    return value or None


def normalize(value):
    """whitespace = "normalize": trim and collapse inner whitespace."""
    if value is None:
        return None
    value = " ".join(value.split())
    return value or None


def to_int(value):
    """type = "int", thousands separators allowed; unconvertible = missing."""
    if value is None:
        return None
    try:
        return int(value.replace(",", ""))
    except ValueError:
        return None


def first_re(pattern, text):
    if text is None:
        return None
    match = pattern.search(text)
    return match.group(1) if match else None


class BbsSpider(RedisSpider):
    name = "bbs_sr"
    allowed_domains = ["127.0.0.1"]
    custom_settings = SETTINGS

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider._dump_stats, signal=signals.spider_closed)
        crawler.signals.connect(spider._responded, signal=signals.response_received)
        return spider

    _last_response = None

    def _responded(self, **_):
        # When the last page arrived, so the benchmark can tell the crawl
        # from the idle wait before the spider closes.
        self._last_response = time.time()

    def _dump_stats(self, spider, reason):
        path = os.environ.get("BBS_SR_STATS")
        if not path:
            return
        stats = dict(self.crawler.stats.get_stats())
        stats["finish_reason"] = reason
        stats["bench/last_response_unix"] = self._last_response
        with open(path, "w", encoding="utf-8") as out:
            json.dump(stats, out, default=str, indent=1, sort_keys=True)

    # scrapy-redis 0.9.1 only defines the start_requests() that Scrapy 2.13
    # deprecates; start() is the same thing without the warning.
    async def start(self):
        for request in self.next_requests():
            yield request

    # Start entries: {"forum_id": "00001", "max_page": 5} → list page 1, the
    # task's fields as meta; start requests skip the dupefilter, as
    # crawlworker's [start] dont_filter default (and scrapy-redis's own).
    def make_request_from_data(self, data):
        task = json.loads(data)
        return Request(
            f"{BASE}/list/{task['forum_id']}/1",
            callback=self.parse_list,
            meta=dict(task),
            dont_filter=True,
        )

    def parse_list(self, response):
        forum_id = response.meta.get("forum_id")
        max_page = response.meta.get("max_page")
        for href in response.css("ul.threads a.title::attr(href)").getall():
            yield response.follow(
                href, self.parse_post, priority=10, meta={"forum_id": forum_id}
            )
        for href in response.css("div.pager a.next::attr(href)").getall():
            request = response.follow(
                href,
                self.parse_list,
                dont_filter=True,
                meta={"forum_id": forum_id, "max_page": max_page},
            )
            # paginate = { page = '/list/\d+/(\d+)', max = "{max_page}" }
            page = first_re(LIST_PAGE, request.url)
            if page is not None and max_page is not None and int(page) > int(max_page):
                continue
            yield request

    def parse_post(self, response):
        item = {
            "kind": "post",
            "post_id": to_int(first_re(POST_ID, response.url)),
            "forum_id": response.meta.get("forum_id"),
            "title": strip(response.css("h1.post-title::text").get()),
            "author": strip(response.css("div.meta span.author::text").get()),
            "posted": strip(response.css("time.posted::attr(datetime)").get()),
            "views": to_int(
                response.css("span.views::text").re_first(DIGITS_COMMAS)
            ),
            "body": normalize("".join(response.css("div.post-body ::text").getall())),
            "url": response.url,
        }
        if item["views"] is None:
            item["views"] = 0
        required = ("post_id", "forum_id", "title", "posted")
        if all(item[field] is not None for field in required):
            yield item
        for href in response.css("a.comments::attr(href)").getall():
            yield response.follow(
                href,
                self.parse_comments,
                priority=20,
                meta={"forum_id": response.meta.get("forum_id")},
            )

    def parse_comments(self, response):
        post_id = to_int(first_re(COMMENT_POST_ID, response.url))
        for node in response.css("div.comments div.comment"):
            item = {
                "kind": "comment",
                "comment_id": strip(node.attrib.get("data-id")),
                "post_id": post_id,
                "forum_id": response.meta.get("forum_id"),
                "user": strip(node.css("span.user::text").get()),
                "floor": to_int(node.css("span.floor::text").re_first(DIGITS)),
                "text": normalize("".join(node.css("p.text ::text").getall())),
            }
            required = ("comment_id", "post_id", "text")
            if all(item[field] is not None for field in required):
                yield item
        for href in response.css("div.pager a.next::attr(href)").getall():
            yield response.follow(
                href,
                self.parse_comments,
                priority=20,
                meta={"forum_id": response.meta.get("forum_id")},
            )
