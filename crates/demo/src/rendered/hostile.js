// The hostile pages of the demo's JavaScript-built section, served as
// /js/hostile.js (see rendered.rs): pages that never go quiet, leave, or
// flood the server, for the renderer's robustness tests. Each writes its
// h1.post-title at once, so a renderer that gives up still has content.
'use strict';

(() => {
  // Pings /js/hostile/many-requests fires at once (FLOOD_REQUESTS in rendered.rs).
  const FLOOD_REQUESTS = 1000;

  const app = document.getElementById('app');

  function write(tag, className, text) {
    const node = document.createElement(tag);
    node.className = className;
    node.textContent = text;
    app.appendChild(node);
    return node;
  }

  // `from` tells the pages' pings apart in the server's hit counts.
  function ping(from, n) {
    return fetch(`/js/data/ping?${from}=${n}`).then((response) => response.ok);
  }

  const PAGES = {
    // A request the server never answers, and a ping every 100 ms for ever:
    // the network never goes idle.
    'never-settles'() {
      write('h1', 'post-title', 'never settles');
      fetch('/js/hostile/hang').catch(() => {});
      let n = 0;
      setInterval(() => {
        ping('tick', n).catch(() => {});
        n += 1;
      }, 100);
    },
    // Content, then another page 50 ms later.
    'navigates-away'() {
      write('h1', 'post-title', 'navigates away');
      setTimeout(() => {
        location.href = '/js/hostile/elsewhere';
      }, 50);
    },
    // FLOOD_REQUESTS pings at once; p.answered once every one settled.
    'many-requests'() {
      write('h1', 'post-title', 'many requests');
      const pings = [];
      for (let n = 0; n < FLOOD_REQUESTS; n += 1) {
        pings.push(ping('n', n));
      }
      Promise.allSettled(pings).then((results) => {
        const ok = results.filter((r) => r.status === 'fulfilled' && r.value).length;
        write('p', 'answered', `${ok} of ${FLOOD_REQUESTS} answered`);
      });
    },
  };

  const name = location.pathname.split('/').pop();
  const page = PAGES[name];
  if (page) {
    page();
  } else {
    write('p', 'error', `no hostile page ${name}`);
  }
})();
