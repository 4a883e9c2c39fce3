#!/usr/bin/env python3
"""Generate crates/scrapy-url/data/vectors.json with the real Python code:
w3lib's safe_url_string and canonicalize_url, scrapy.Request, and
scrapy-redis's RFPDupeFilter.request_fingerprint.

    python3 crates/scrapy-url/gen/gen_vectors.py > crates/scrapy-url/data/vectors.json

With `--random N --seed S` it emits N extra random cases instead of the
committed set, for differential testing against the Rust port (see
README.md).
"""

import argparse
import json
import platform
import random
import sys
from importlib.metadata import version
from urllib.parse import urljoin

import scrapy
from scrapy_redis.dupefilter import RFPDupeFilter
from w3lib.encoding import resolve_encoding
from w3lib.url import canonicalize_url, safe_url_string

# The dupefilter never touches its server when fingerprinting.
DUPEFILTER = RFPDupeFilter(server=None, key="vectors:dupefilter")


def err(exc):
    return f"{type(exc).__name__}: {exc}"


def run(category, url, method="GET", body=b""):
    case = {"category": category, "url": url, "method": method, "body_hex": body.hex()}
    try:
        case["safe_url"] = safe_url_string(url, "utf-8")
    except ValueError as exc:
        case["safe_url"] = None
        case["safe_url_error"] = err(exc)
    try:
        case["canonical_raw"] = canonicalize_url(url)
    except ValueError as exc:
        case["canonical_raw"] = None
        case["canonical_raw_error"] = err(exc)
    if case["safe_url"] is not None:
        try:
            case["canonical_url"] = canonicalize_url(case["safe_url"])
        except ValueError as exc:
            case["canonical_url"] = None
            case["canonical_url_error"] = err(exc)
    try:
        request = scrapy.Request(url, method=method, body=body)
    except (ValueError, TypeError) as exc:
        case["expect_error"] = err(exc)
        return case
    case["request_url"] = request.url
    case["request_method"] = request.method
    try:
        case["fingerprint"] = DUPEFILTER.request_fingerprint(request)
    except ValueError as exc:
        case["fingerprint"] = None
        case["fingerprint_error"] = err(exc)
    return case


def run_encoded(category, url, label):
    codec = resolve_encoding(label)
    case = {"category": category, "url": url, "encoding_label": label, "python_codec": codec}
    try:
        case["safe_url"] = safe_url_string(url, codec)
    except ValueError as exc:
        case["safe_url"] = None
        case["expect_error"] = err(exc)
    return case


# --------------------------------------------------------------------------
# Hand-picked cases, by category.

QUERY = [
    "http://www.example.com/do?c=3&b=5&b=2&a=50",
    "http://www.example.com/do?a=2&a=1&a=10&a=",
    "http://www.example.com/do?b=&a=&c",
    "http://www.example.com/do?a&b&a",
    "http://www.example.com/do?=x&=a&b=",
    "http://www.example.com/do?a=1&&b=2&",
    "http://www.example.com/do?&&&",
    "http://www.example.com/do?&",
    "http://www.example.com/do?",
    "http://www.example.com/do??",
    "http://www.example.com/do???a=1",
    "http://www.example.com/do?a=1?b=2",
    "http://www.example.com/do?a=1;b=2",
    "http://www.example.com/do?b=1;a=2&a=1",
    "http://www.example.com/do?;;",
    "http://www.example.com/do?a=1&amp;b=2",
    "http://www.example.com/do?a=1&amp;amp;b=2&amp",
    "http://www.example.com/do?q=a+b&q=a%20b&q=a b",
    "http://www.example.com/do?q=%2B&r=+",
    "http://www.example.com/do?a=b=c&d==",
    "http://www.example.com/do?a%3Db=c",
    "http://www.example.com/do?a=%26&b=%3d",
    "http://www.example.com/do?key=value#frag",
    "http://www.example.com/do?z=1&Z=2&a=3&A=4&_=5&-=6&~=7&.=8",
    "http://www.example.com/do?b=%E9&a=%C3%A9",
    "http://www.example.com/do?q=%zz&r=%2&s=%",
    "http://www.example.com/do?q=%25&q=%2525",
    "http://www.example.com/do?q='quoted'&r=\"dq\"",
    "http://www.example.com/do?q=<tag>&r={x}&s=[y]&t=|&u=^&v=`",
    "http://www.example.com/do?q=a\\b",
    "http://www.example.com/do?q=/path/?x=1:2@3",
    "http://www.example.com/do?q=!$'()*,",
    "http://www.example.com/do?q=%21%24%27%28%29%2A%2C",
    "http://www.example.com/do?utm_source=x&id=7&utm_medium=y",
    "http://www.example.com/do?a=1&a=1&a=1",
    "http://www.example.com/?q=%00%01%1F%7F%80%FF",
    "http://www.example.com/?q=\x7f",
    "http://www.example.com/?%41=%61",
    "http://www.example.com/search?q=caf%C3%A9&lang=fr",
    "http://www.example.com/search?q=café&lang=fr",
    "http://www.example.com/search?q=中文&页=2",
    "http://www.example.com/search?q=%E4%B8%AD%E6%96%87",
    "http://www.example.com/search?q=%e4%b8%ad%e6%96%87",
    "http://www.example.com/search?emoji=😀&x=🇫🇷",
    "http://www.example.com/search?q=%D6%D0%CE%C4",
    "foo://host/?q='x'",
    "foo://host?q=1",
]

PERCENT = [
    "http://www.example.com/a%2Fb/c%2fd",
    "http://www.example.com/a%3Bb;c%3bd",
    "http://www.example.com/a%3Fb%3fc",
    "http://www.example.com/a%23b",
    "http://www.example.com/a%25b%2525c",
    "http://www.example.com/%41%42%43%7e%7E%2D%2e%5F",
    "http://www.example.com/%61%62%63",
    "http://www.example.com/%c3%a9t%C3%A9",
    "http://www.example.com/%E9t%E9",
    "http://www.example.com/%zz%2%",
    "http://www.example.com/%%",
    "http://www.example.com/%252f%252F",
    "http://www.example.com/%5B%5D%7C%5b%5d%7c",
    "http://www.example.com/[a]|b|",
    "http://www.example.com/%20%2B+",
    "http://www.example.com/%00%0a%0D",
    "http://www.example.com/%3A%40%21%24%26%27%28%29%2A%2B%2C%3D",
    "http://www.example.com/a%2e%2E/b",
    "http://www.example.com/%2e%2e/a",
    "http://www.example.com/a/%2e/b",
    "http://www.example.com/p?q=%2f%2F#%2f",
    "http://www.example.com/p#frag%20ment%zz",
    "http://us%65r:p%40ss@www.example.com/",
    "http://user%:pa%zzss@www.example.com/",
]

SPACES_AND_SPECIALS = [
    "http://www.example.com/a b/c d?q=e f#g h",
    "  http://www.example.com/leading-and-trailing  ",
    "\t\nhttp://www.example.com/ctl\t\n",
    "http://www.exa\tmple.com/t\tab\n?q=a\rb",
    "\x00\x1fhttp://www.example.com/c0\x01\x02",
    "http://www.example.com/\x01\x7f",
    "http://www.example.com/<>\"`{}|\\^",
    "http://www.example.com\\path\\to?q=a\\b#c\\d",
    "http://www.example.com/a\\b",
    "foo://www.example.com\\path\\to?q=a\\b",
    "http://evil.com\\@good.com/",
    "http://www.example.com/it's",
    "http://www.example.com/~user/!$&'()*+,;=:@/",
    "http://www.example.com/\u00a0nbsp\u3000ideo",
    "http://www.example.com/\u200bzw\u200d",
    "http://www.example.com/ end ",
]

UNICODE_PARTS = [
    "http://www.example.com/résumé",
    "http://www.example.com/re\u0301sume\u0301",
    "http://www.example.com/路径/文件.html",
    "http://www.example.com/путь?запрос=значение",
    "http://www.example.com/パス?検索=テスト#断片",
    "http://www.example.com/😀/🇯🇵",
    "http://www.example.com/ﬁ/①/Ａ",
    "http://www.example.com/#résumé",
    "http://www.example.com/#中文",
    "http://www.example.com/مسار?استعلام=قيمة",
    "http://www.example.com/\U0001f600?\U0001f600=\U0001f600#\U0001f600",
    "http://www.example.com/\ud7ff\ue000\uffff",
]

HOSTS = [
    "http://WWW.EXAMPLE.COM/Path",
    "HTTP://www.Example.Com",
    "hTTpS://www.example.com:443/",
    "http://例子.测试/路径?q=值",
    "http://例子.测试",
    "http://www.例子.com/",
    "http://bücher.de/",
    "http://BÜCHER.de/",
    "http://straße.de/",
    "http://ΣΊΣΥΦΟΣ.gr/",
    "http://σίσυφος.gr/",
    "http://пример.рф/",
    "http://ПРИМЕР.РФ/",
    "http://مثال.إختبار/",
    "http://aمثال.com/",
    "http://مثالa.com/",
    "http://例子。测试/",
    "http://例子．测试/",
    "http://例子｡测试/",
    "http://ｅｘａｍｐｌｅ．ｃｏｍ/",
    "http://ＥＸＡＭＰＬＥ.ｃｏｍ/",
    "http://xn--fsqu00a.xn--0zwm56d/",
    "http://XN--FSQU00A.XN--0ZWM56D/",
    "http://xn--例.com/",
    "http://a\u200db.例子/",
    "http://a\u200cb.com/",
    "http://a\u00adb.例子/",
    "http://\u00ad.例子/",
    "http://例子..测试/",
    "http://.例子/",
    "http://例子./",
    "http://example.com./",
    "http://a..b/",
    "http://.example.com/",
    "http://" + "a" * 63 + ".com/",
    "http://" + "a" * 64 + ".com/",
    "http://" + "a" * 64 + "/",
    "http://" + "例" * 20 + ".com/",
    "http://" + "例" * 30 + ".com/",
    "http://" + "例" * 19 + "a" * 30 + ".com/",
    "http://" + "e\u0301" * 40 + ".com/",
    "http://a" + "\u0301\u0323" * 20 + ".com/",
    "http://例\ue000子.com/",
    "http://例\u3000子.com/",
    "http://例 子.com/",
    "http://☃.net/",
    "http://😀.example/",
    "http://ex_ample.com/",
    "http://ex%41mple.com/",
    "http://ex%e4%be%8b.com/",
    "http://exa mple.com/",
    "http://例子.com\u3002/",
    "http://ǅungla.例/",
    "http://İstanbul.例/",
    "http://İSTANBUL.com/",
    "http://ﬁ.例/",
    "http://①.例/",
    "http://\u2488.例/",
    "http://ex＠mple.com/",
    "http://ex／mple.com/",
    "http://ex？mple.com/",
    "http://ex＃mple.com/",
    "http://ex：80/",
    "http://ex＼mple.com/",
    "http://℀.com/",
    "http://a\u2100b.com/",
    "foo://a\\b例/",
    "http://127.0.0.1/",
    "http://127.0.0.1:8080/x",
    "http://0x7f.1/",
    "http://localhost/",
    "http:///nohost",
    "http://",
    "http:",
    "http:/path",
    "http:path",
    "http://@/",
    "http://:80/",
]

USERINFO = [
    "http://user:pass@www.example.com/",
    "http://User:Pass@WWW.Example.com/",
    "http://user@www.example.com/",
    "http://user:@www.example.com/",
    "http://:pass@www.example.com/",
    "http://@www.example.com/",
    "http://:@www.example.com/",
    "http://us er:pa ss@www.example.com/",
    "http://us;er:pa=ss@www.example.com/",
    "http://us%3Aer:pa%3Ass@www.example.com/",
    "http://a:b:c@www.example.com/",
    "http://a@b@www.example.com/",
    "http://用户:密码@www.example.com/",
    "http://user!$&'()*+,:p@www.example.com/",
    "http://us%40er:p%2Fss@www.example.com/",
    "http://user:pass@[::1]:8080/",
    "http://us[er@host/",
    "http://u[s]er@host/",
]

PORTS = [
    "http://www.example.com:80/",
    "https://www.example.com:443/",
    "http://www.example.com:443/",
    "http://www.example.com:8080/",
    "http://www.example.com:/",
    "http://www.example.com:0/",
    "http://www.example.com:080/",
    "http://www.example.com:0000000000080/",
    "http://www.example.com:65535/",
    "http://www.example.com:65536/",
    "http://www.example.com:99999999999999999999/",
    "http://www.example.com:8a/",
    "http://www.example.com:-1/",
    "http://www.example.com:+80/",
    "http://www.example.com: 80/",
    "http://www.example.com:٣/",
    "http://www.example.com:80:90/",
    "ftp://ftp.example.com:21/pub",
    "ws://www.example.com:80/socket",
    "wss://www.example.com/socket?x=1",
]

IPV6 = [
    "http://[::1]/",
    "http://[::]/",
    "http://[::]:80/",
    "http://[0::0]/",
    "http://[::ffff:0.0.0.0]/",
    "http://[1:2:3:4:5:6:7::]/",
    "http://[::2:3:4:5:6:7:8]/",
    "http://[1:2:3:4:5:6:7:8]/",
    "http://[1:2:3:4:5:6:1.2.3.4]/",
    "http://[::1]:8080/path",
    "http://[2001:DB8::1]/",
    "http://[2001:db8:0:0:0:0:0:1]/",
    "http://[0:0:0:0:0:0:0:1]/",
    "http://[::0:1]/a/../b",
    "http://[::ffff:1.2.3.4]/",
    "http://[::ffff:01.2.3.4]/",
    "http://[1:0:0:2:0:0:0:3]/",
    "http://[1:0:0:0:2:0:0:3]/",
    "http://[fe80::1%25eth0]/",
    "http://[fe80::1%eth0]/",
    "http://[FE80::1%25ETH0]/",
    "http://[fe80::1%]/",
    "http://[v1.abc]/",
    "http://[v1.ab:cd]/",
    "http://[V1.abc]/",
    "http://[vz.abc]/",
    "http://[1.2.3.4]/",
    "http://[::1/",
    "http://::1]/",
    "http://[invalid]/",
    "http://[::1]x/",
    "http://x[::1]/",
    "http://[::1]:/",
    "http://[::1]:65536/",
    "http://[1::2::3]/",
    "http://[::1]]/",
    "http://host/[::1]",
    "http://host/a?b=[c]",
    "http://[::1]#[frag]",
]

FRAGMENTS = [
    "http://www.example.com/page#section",
    "http://www.example.com/page#",
    "http://www.example.com/page#a#b",
    "http://www.example.com/page#frag?notquery",
    "http://www.example.com/page?q=1#frag?x=2",
    "http://www.example.com/#!/ajax/route",
    "http://www.example.com/page?#",
    "http://www.example.com/page#?",
    "http://www.example.com#",
    "http://www.example.com?#",
    "http://www.example.com#frag",
]

PATHS = [
    "http://www.example.com",
    "http://www.example.com/",
    "http://www.example.com?a=1",
    "http://www.example.com?",
    "foo://www.example.com?a=1",
    "http://www.example.com/a/./b/../c",
    "http://www.example.com/a/b/..",
    "http://www.example.com/a/b/.",
    "http://www.example.com/..",
    "http://www.example.com/../../a",
    "http://www.example.com/./",
    "http://www.example.com/a/.../b",
    "http://www.example.com/a/..b/c",
    "http://www.example.com/.hidden/x",
    "http://www.example.com//double//slash//",
    "http://www.example.com/a;p=1/b;q=2",
    "http://www.example.com/a/b;q=2;r=3?x=1",
    "http://www.example.com/a/b;",
    "http://www.example.com/;x",
    "http://www.example.com/a/b/;/c",
    "foo://www.example.com/a;p=1",
    "http://www.example.com/index.html",
    "http://www.example.com/UPPER/Case",
    "http://www.example.com/a:b@c",
]

SCHEMES = [
    "HTTP://www.example.com/",
    "https://www.example.com/",
    "HtTpS://www.example.com/",
    "ftp://user@ftp.example.com/file.txt",
    "file:///etc/passwd",
    "file://localhost/etc/hosts",
    "file:///C:/Windows/",
    "mailto:someone@example.com",
    "mailto:a/../b",
    "data:text/plain,hello world",
    "data:text/html;base64,PGI+aGk8L2I+",
    "about:blank",
    "about:",
    "javascript:alert(1)",
    "custom-scheme+v1.0://host/path?x=1",
    "foo:/a/../b",
    "foo://",
    "git+ssh://git@example.com/repo.git",
    "svn+ssh://example.com/repo",
    "urn:isbn:0451450523",
    "tel:+1-555-0100",
    "//www.example.com/protocol-relative",
    "www.example.com/no-scheme",
    "/absolute/path",
    "relative/path?q=1",
    "?q=1",
    "#frag",
    "",
    "   ",
    "localhost:8080/path",
    "1http://example.com/",
    "h:/x",
    "http",
    "http:",
    "://example.com/",
]

BODIES = [
    ("POST", "http://www.example.com/form", b"a=1&b=2"),
    ("POST", "http://www.example.com/form", b'{"json": "body", "n": [1, 2]}'),
    ("POST", "http://www.example.com/form", b"\x00\x01\xfe\xff"),
    ("POST", "http://www.example.com/form", "caf\u00e9".encode("latin-1")),
    ("POST", "http://www.example.com/form", "中文".encode("gbk")),
    ("POST", "http://www.example.com/form", "中文".encode("utf-8")),
    ("POST", "http://www.example.com/form", b""),
    ("POST", "http://www.example.com/form", bytes(range(256)) * 4),
    ("PUT", "http://www.example.com/item/1", b"data"),
    ("put", "http://www.example.com/item/1", b"data"),
    ("Patch", "http://www.example.com/item/1", b"x"),
    ("DELETE", "http://www.example.com/item/1", b""),
    ("HEAD", "http://www.example.com/", b""),
    ("OPTIONS", "http://www.example.com/", b""),
    ("get", "http://www.example.com/", b""),
    ("GET", "http://www.example.com/", b"body on a GET"),
    ("M-SEARCH", "http://www.example.com/", b""),
    ("gét", "http://www.example.com/", b""),
    ("straße", "http://www.example.com/", b""),
    ("GET\"\\", "http://www.example.com/", b""),
    ("POST", "http://例子.测试/提交?q=值", "表单=数据".encode("utf-8")),
]

# (page charset label, base page, link). The label is what the page
# declares; Scrapy resolves it to a Python codec with
# w3lib.encoding.resolve_encoding (gbk -> gb18030, shift_jis -> cp932, ...)
# and the Rust side looks the same label up with encoding_rs.
ENCODED = [
    ("gbk", "http://www.example.cn/论坛/列表.html", "搜索?关键词=中文&页=2"),
    ("gbk", "http://www.example.cn/", "/路径/文件?q=值#片段"),
    ("gbk", "http://www.example.cn/", "?q=%D6%D0%CE%C4&r=中"),
    ("gbk", "http://www.example.cn/", "?q=ü&r=é&s=€"),
    ("gbk", "http://www.example.cn/", "?q=😀"),
    ("gbk", "http://www.example.cn/", "?q=ő&r=ḿ"),
    ("gbk", "http://www.example.cn/", "?q=\\|[]{}@"),
    ("gbk", "http://例子.测试/", "?q=中 文"),
    ("gbk", "http://www.example.cn/", "#中文"),
    ("gbk", "http://www.example.cn/", "?q=ㄅ丂乚亐\ue5e5\ufe10"),
    ("gb2312", "http://www.example.cn/", "?q=简体&r=繁體"),
    ("gb18030", "http://www.example.cn/", "?q=中文&e=😀&x=€"),
    ("gb18030", "http://www.example.cn/", "/页?q=ḿ\u9fb4"),
    ("utf-8", "http://www.example.com/", "?q=中文&e=😀"),
    ("shift_jis", "http://www.example.jp/", "検索?q=日本語&k=カタカナ"),
    ("shift_jis", "http://www.example.jp/", "?q=～"),
    ("shift_jis", "http://www.example.jp/", "?q=é"),
    ("shift_jis", "http://www.example.jp/", "?name=髙橋&x=〜&y=¥"),
    ("shift_jis", "http://www.example.jp/", "?name=髙橋&x=〜&pua=\ue000"),
    ("euc-jp", "http://www.example.jp/", "?q=丂&r=ß"),
    ("iso-2022-jp", "http://www.example.jp/", "?q=日本語&r=カナ"),
    ("iso-2022-jp", "http://www.example.jp/", "?q=①"),
    ("big5", "http://www.example.hk/", "?q=㐵&r=Ê\u0304&s=€"),
    ("big5", "http://www.example.hk/", "?q=㐵&r=Ê\u0304Ê"),
    ("euc-jp", "http://www.example.jp/", "?q=日本語"),
    ("euc-kr", "http://www.example.kr/", "?q=한국어&r=똠"),
    ("big5", "http://www.example.tw/", "?q=繁體中文"),
    ("windows-1251", "http://www.example.ru/", "?q=привет"),
    ("koi8-r", "http://www.example.ru/", "?q=привет"),
    ("koi8-u", "http://www.example.ua/", "?q=привіт&r=ў"),
    ("windows-1252", "http://www.example.fr/", "?q=café€"),
    ("iso-8859-1", "http://www.example.fr/", "?q=café€#ça"),
    ("windows-1252", "http://www.example.fr/", "?q=中"),
    ("windows-1252", "http://www.example.fr/", "?q=\x81"),
    ("iso-8859-2", "http://www.example.pl/", "?q=zażółć"),
    ("windows-1255", "http://www.example.il/", "?q=שלום"),
    ("utf-16le", "http://www.example.com/", "?q=ab"),
    ("utf-16be", "http://www.example.com/", "?q=é"),
    ("utf-8", "foo://host/", "?q='é'"),
]


def handpicked():
    cases = []
    for category, urls in [
        ("query", QUERY),
        ("percent", PERCENT),
        ("specials", SPACES_AND_SPECIALS),
        ("unicode", UNICODE_PARTS),
        ("host", HOSTS),
        ("userinfo", USERINFO),
        ("port", PORTS),
        ("ipv6", IPV6),
        ("fragment", FRAGMENTS),
        ("path", PATHS),
        ("scheme", SCHEMES),
    ]:
        cases.extend(run(category, url) for url in urls)
    cases.extend(run("body", url, method, body) for method, url, body in BODIES)
    encoded = []
    for label, base, link in ENCODED:
        encoded.append(run_encoded("encoding", urljoin(base, link), label))
    return cases, encoded


# --------------------------------------------------------------------------
# Random cases: URLs assembled from troublesome pieces.

SCHEME_PIECES = ["http", "https", "HTTP", "ftp", "ws", "file", "foo", "mailto", ""]
USER_PIECES = ["", "", "", "u", "U:p", "us er:p@ss", "a%40b", "用户", ":", "u:"]
HOST_PIECES = [
    "example.com", "EXAMPLE.com", "例子.测试", "bücher.de", "straße.de", "xn--fsq.com",
    "a..b", "[::1]", "[2001:DB8::0:1]", "127.0.0.1", "ｅｘａｍｐｌｅ．com", "пример.рф",
    "", "ex_ample.com", "a" * 64 + ".com", "مثال.com",
]
PORT_PIECES = ["", "", "", ":80", ":443", ":8080", ":", ":080", ":65535"]
SEGMENT_PIECES = [
    "a", "B", ".", "..", "%2F", "%2f", "%41", "%7e", "%25", "%zz", "%", "é", "中文", "a b",
    ";p=1", "%3B", "%3f", "[x]", "|", "~", "😀", "'", "\\", "%E9", "", "index.html",
]
QUERY_PIECES = [
    "a=1", "b=2", "a=", "a", "=x", "", "c=%20", "c=+", "d=%2B", "e=é", "f=中文", "g=%E9",
    "h=%zz", "i=a;b", "j='x'", "k=<>", "amp;l=1", "m=%26", "n==", "o=😀", "A=1", "p=a b",
]
FRAGMENT_PIECES = ["", "", "f", "frag ment", "é", "a#b", "?x", "%41"]
METHOD_PIECES = ["GET", "GET", "POST", "put", "HEAD"]
BODY_PIECES = [b"", b"", b"x=1", b"\xff\x00", "é".encode()]


def random_url(rng):
    scheme = rng.choice(SCHEME_PIECES)
    url = f"{scheme}:" if scheme else ""
    if scheme != "mailto" and rng.random() < 0.9:
        user = rng.choice(USER_PIECES)
        url += "//" + (user + "@" if user else "") + rng.choice(HOST_PIECES) + rng.choice(PORT_PIECES)
    for _ in range(rng.randrange(4)):
        url += "/" + rng.choice(SEGMENT_PIECES)
    if rng.random() < 0.6:
        url += "?" + "&".join(rng.choice(QUERY_PIECES) for _ in range(rng.randrange(5)))
    if rng.random() < 0.3:
        url += "#" + rng.choice(FRAGMENT_PIECES)
    return url


def random_cases(count, seed):
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        cases.append(run("random", random_url(rng), rng.choice(METHOD_PIECES), rng.choice(BODY_PIECES)))
    return cases


ENCODED_LABELS = [
    "gbk", "gb18030", "windows-1252", "euc-kr", "koi8-u", "windows-1251", "utf-8", "shift_jis",
    "euc-jp", "big5", "iso-2022-jp",
]
TEXT_PIECES = [
    "中文", "é", "€", "😀", "ü", "a b", "%E9", "привет", "한", "ḿ", "\x81", "'", "ў", "x", "髙", "〜",
    "¥", "㐵", "Ê\u0304", "丂", "カナ", "¢", "‾", "~", "\\", "日本", "\u2016",
]


def random_encoded_cases(count, seed):
    rng = random.Random(seed + 1)
    cases = []
    for _ in range(count):
        label = rng.choice(ENCODED_LABELS)
        text = "".join(rng.choice(TEXT_PIECES) for _ in range(rng.randrange(1, 4)))
        url = f"http://www.example.com/{rng.choice(TEXT_PIECES)}?q={text}"
        if rng.random() < 0.3:
            url += "#" + rng.choice(TEXT_PIECES)
        cases.append(run_encoded("random-encoding", url, label))
    return cases


# Characters for --chaos: URL delimiters and specials, escapes, and Unicode
# that exercises NFKC, nameprep, bidi and lower-casing in hosts.
CHAOS_ALPHABET = (
    list(":/?#[]@!$&'()*+,;=%-._~ \\\"<>^`{|}\t\x00\x7f")
    + ["%2F", "%2f", "%25", "%zz", "%41", "%E9", "%3B", "%3F", "::", "//", "xn--", "v1.", "..", "80"]
    + list("aZ09")
    + list("éÉßẞİıΣσςﬁ①⒈＠／：？＃＼．。｡ｅＡ℀¼ª\u00ad\u200d\u200c\u3000\ue000\u0301\u0323")
    + list("例子中文пример\u05d0\u0627\u1100\u1161\u11a8각😀\U0001d400\ufb01\u2474\u3300")
)


def chaos_url(rng):
    prefix = rng.choice(["http://", "https://", "HTTP://", "foo://", "file://", "http:", "", "ws://", "//"])
    return prefix + "".join(rng.choice(CHAOS_ALPHABET) for _ in range(rng.randrange(1, 25)))


def random_code_point(rng):
    """Any assigned-or-not non-surrogate code point, weighted to the BMP."""
    while True:
        cp = rng.randrange(0x80, 0x3400) if rng.random() < 0.6 else rng.randrange(0x80, 0x110000)
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def host_url(rng):
    labels = []
    for _ in range(rng.randrange(1, 4)):
        label = "".join(
            random_code_point(rng) if rng.random() < 0.5 else rng.choice("abcXYZ-0.")
            for _ in range(rng.randrange(1, 8))
        )
        labels.append(label)
    return "http://" + ".".join(labels) + rng.choice(["/", "/p?q=1", ":8080/", ""])


def chaos_cases(count, seed):
    rng = random.Random(seed)
    return [
        run("chaos", chaos_url(rng) if i % 2 else host_url(rng), rng.choice(METHOD_PIECES), rng.choice(BODY_PIECES))
        for i in range(count)
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, default=0, help="emit only N random cases")
    parser.add_argument("--chaos", type=int, default=0, help="emit only N character-soup cases")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()

    if args.random or args.chaos:
        cases = random_cases(args.random, args.seed) + chaos_cases(args.chaos, args.seed)
        encoded = random_encoded_cases(args.random // 10, args.seed)
    else:
        cases, encoded = handpicked()
        cases.extend(random_cases(300, args.seed))
        encoded.extend(random_encoded_cases(80, args.seed))

    refused = sum("expect_error" in c for c in cases)
    doc = {
        "generator": "crates/scrapy-url/gen/gen_vectors.py",
        "versions": {
            "python": platform.python_version(),
            "w3lib": version("w3lib"),
            "scrapy": scrapy.__version__,
            "scrapy-redis": version("scrapy-redis"),
        },
        "counts": {
            "cases": len(cases),
            "requests_refused_by_scrapy": refused,
            "fingerprinted": sum(c.get("fingerprint") is not None for c in cases),
            "encoded_cases": len(encoded),
            "encoded_refused": sum("expect_error" in c for c in encoded),
        },
        "cases": cases,
        "encoded_cases": encoded,
    }
    json.dump(doc, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
