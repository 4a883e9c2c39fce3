// The demo forum's JavaScript-built section (/js/...), served as
// /js/app.js (see rendered.rs).
//
// Every page under /js/ is an empty shell (<div id="app"></div>); this
// script reads location.pathname, fetches the page's data from
// /js/data/... (JSON) and builds the DOM the HTML forum's page has, with
// createElement and text nodes: the same elements, classes, nesting and
// text (whitespace text nodes included), so the demo spider's selectors
// read the same items. The data carries every link, already pointing into
// /js/. A list page shows the first half of its threads and loads the rest
// on a click of button.load-more or when the end of the list scrolls into
// view; a post's avatar gets its src when it enters the viewport.
//
// ASCII only: the Chinese labels are \u escapes.
'use strict';

(() => {
  const LABELS = {
    home: '\u9996\u9875', // the home page
    prev: '\u4e0a\u4e00\u9875', // previous page
    next: '\u4e0b\u4e00\u9875', // next page
    loadMore: 'Load more',
  };

  // The list page's footer: links a crawler must drop, as on the HTML page.
  const FOOTER_LINKS = [
    ['#top', 'Top'],
    ['mailto:admin@demo.invalid', 'Contact'],
    ['javascript:void(0)', 'Login'],
    ['http://ads.demo.invalid/click?id=1', 'Ad'],
  ];

  // An element with attributes and children; strings become text nodes,
  // null children are skipped.
  function el(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      node.setAttribute(name, value);
    }
    for (const child of children) {
      if (child === null || child === undefined) {
        continue;
      }
      node.appendChild(typeof child === 'string' ? textNode(child) : child);
    }
    return node;
  }

  function textNode(text) {
    const node = document.createTextNode('');
    node.textContent = text;
    return node;
  }

  function appendAll(parent, ...children) {
    for (const child of children) {
      parent.appendChild(typeof child === 'string' ? textNode(child) : child);
    }
  }

  async function getJson(url) {
    const response = await fetch(url, { headers: { Accept: 'application/json' } });
    if (!response.ok) {
      throw new Error(`${url}: HTTP ${response.status}`);
    }
    return response.json();
  }

  // 1234567 -> "1,234,567", as the post pages show views.
  function thousands(n) {
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  }

  function pager(prev, current, next) {
    return el(
      'div',
      { class: 'pager' },
      prev ? el('a', { class: 'prev', href: prev }, LABELS.prev) : null,
      prev ? ' ' : null,
      el('span', { class: 'current' }, String(current)),
      next ? ' ' : null,
      next ? el('a', { class: 'next', href: next }, LABELS.next) : null,
    );
  }

  function breadcrumb(data) {
    return el(
      'div',
      { class: 'breadcrumb' },
      el('a', { href: data.home }, LABELS.home),
      ' > ',
      el('a', { class: 'forum-link', href: data.forum.href }, data.forum.name),
    );
  }

  function footer() {
    const links = [];
    FOOTER_LINKS.forEach(([href, label], index) => {
      if (index > 0) {
        links.push(' ');
      }
      links.push(el('a', { href }, label));
    });
    return el('div', { class: 'footer' }, ...links);
  }

  function indexPage(app, data) {
    const forums = el('ul', { class: 'forums' });
    for (const forum of data.forums) {
      forums.appendChild(el('li', {}, el('a', { class: 'forum', href: forum.href }, forum.name)));
    }
    appendAll(app, el('h1', {}, data.title), '\n', forums, '\n');
  }

  function listPage(app, data) {
    const threads = el('ul', { class: 'threads' }, '\n');
    appendThreads(threads, data.threads);
    appendAll(
      app,
      el('p', { class: 'nav', id: 'top' }, el('a', { href: data.home }, LABELS.home)),
      '\n',
      el('h1', { class: 'forum-name' }, data.forum.name),
      '\n',
      threads,
      '\n',
    );
    const more = data.more ? loadMore(threads, data.more) : [];
    appendAll(app, ...more, pager(data.prev, data.page, data.next), '\n', footer(), '\n');
    if (more.length > 0) {
      more.start();
    }
  }

  function appendThreads(list, threads) {
    for (const thread of threads) {
      const item = el(
        'li',
        { class: 'thread' },
        el('a', { class: 'title', href: thread.href }, thread.title),
        ' ',
        el('span', { class: 'author' }, thread.author),
        ' ',
        el('span', { class: 'replies' }, String(thread.replies)),
      );
      appendAll(list, item, '\n');
    }
  }

  // The rest of a list page, loaded once: on a click of the button, or
  // when the sentinel after the list scrolls into view. Returns the nodes
  // to insert after the list, and `start()` to call once they are in.
  function loadMore(list, url) {
    const button = el('button', { class: 'load-more', type: 'button' }, LABELS.loadMore);
    const sentinel = el('div', { class: 'load-more-sentinel' });
    let loading = null;
    const observer = new IntersectionObserver((entries) => {
      if (entries.some((entry) => entry.isIntersecting)) {
        load();
      }
    });
    function load() {
      if (loading === null) {
        button.disabled = true;
        loading = getJson(url)
          .then((data) => {
            appendThreads(list, data.threads);
            observer.disconnect();
            sentinel.remove();
            button.remove();
          })
          .catch((error) => {
            loading = null;
            button.disabled = false;
            console.error(error);
          });
      }
      return loading;
    }
    button.addEventListener('click', load);
    const nodes = [sentinel, button, '\n'];
    nodes.start = () => observer.observe(sentinel);
    return nodes;
  }

  function postPage(app, data) {
    const avatar = el('img', { class: 'avatar', 'data-src': data.avatar, alt: '' });
    const body = el('div', { class: 'post-body' });
    data.body.forEach((paragraph, index) => {
      if (index > 0) {
        appendAll(body, '\n');
      }
      body.appendChild(el('p', {}, ...paragraph.map(inlinePart)));
    });
    const meta = el(
      'div',
      { class: 'meta' },
      el('span', { class: 'author' }, data.author),
      ' ',
      el('time', { class: 'posted', datetime: data.posted }, data.posted_text),
      ' ',
      el('span', { class: 'views' }, `${thousands(data.views)} views`),
    );
    const post = el(
      'div',
      { class: 'post' },
      avatar,
      el('h1', { class: 'post-title' }, data.title),
      meta,
      body,
    );
    appendAll(app, breadcrumb(data), '\n', post, '\n');
    if (data.comments) {
      const link = el('a', { class: 'comments', href: data.comments.href }, data.comments.label);
      appendAll(app, el('p', {}, link), '\n');
    }
    loadWhenVisible(avatar);
  }

  function inlinePart(part) {
    switch (part.type) {
      case 'text':
        return textNode(part.text);
      case 'bold':
        return el('b', {}, part.text);
      case 'link':
        return el('a', { href: part.href }, part.text);
      case 'br':
        return el('br');
      default:
        throw new Error(`unknown body part ${part.type}`);
    }
  }

  // Sets an image's src from its data-src when it enters the viewport.
  function loadWhenVisible(image) {
    const observer = new IntersectionObserver((entries) => {
      if (entries.some((entry) => entry.isIntersecting)) {
        image.src = image.dataset.src;
        observer.disconnect();
      }
    });
    observer.observe(image);
  }

  function commentPage(app, data) {
    const comments = el('div', { class: 'comments' }, '\n');
    for (const comment of data.comments) {
      const item = el(
        'div',
        { class: 'comment', 'data-id': comment.id },
        el('span', { class: 'user' }, comment.user),
        el('span', { class: 'floor' }, `#${comment.floor}`),
        el('p', { class: 'text' }, comment.text),
      );
      appendAll(comments, item, '\n');
    }
    appendAll(
      app,
      breadcrumb(data),
      '\n',
      el('h1', { class: 'post-title' }, data.post.title),
      '\n',
      comments,
      '\n',
      pager(data.prev, data.page, data.next),
      '\n',
    );
  }

  const PAGES = { '': indexPage, list: listPage, post: postPage, comment: commentPage };

  // /js/list/00001/2 -> /js/data/list/00001/2; /js/ -> /js/data/index.
  function dataUrl(pathname) {
    const rest = pathname.slice('/js'.length);
    return `/js/data${rest === '/' ? '/index' : rest}`;
  }

  function showError(app, error) {
    console.error(error);
    appendAll(app, el('p', { class: 'error' }, String(error)));
  }

  async function main() {
    const app = document.getElementById('app');
    const kind = location.pathname.split('/')[2];
    const build = PAGES[kind];
    if (!build) {
      showError(app, new Error(`no page at ${location.pathname}`));
      return;
    }
    try {
      build(app, await getJson(dataUrl(location.pathname)));
    } catch (error) {
      showError(app, error);
    }
  }

  main();
})();
