// The roadmap display: one EventSource, each "view" event the whole view
// of the table (controller/board/state.py, TableState.view). No framework,
// no CDN; text from messages goes in with textContent, never as HTML.
"use strict";

(function () {
  const body = document.body;
  const table = body.dataset.table;
  const history = body.dataset.history; // "" when the board has no journal for this table
  const ROWS = 6;
  const SUITS = { S: "\u2660", H: "\u2665", D: "\u2666", C: "\u2663" };
  const NAMES = { B: "Banker", P: "Player", T: "Tie" };
  const BETS = {
    player: "Player", banker: "Banker", tie: "Tie", player_pair: "Player pair", banker_pair: "Banker pair",
    dragon7: "Dragon 7", panda8: "Panda 8", b27: "B-27",
  };
  const $ = (id) => document.getElementById(id);
  let view = null;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function show(id, on, text) {
    const e = $(id);
    e.hidden = !on;
    if (text !== undefined) e.textContent = text;
  }

  function coupLink(coup) {
    if (!history || coup === null || coup === undefined || !view || !view.shoe) return null;
    return history + "/coup/" + encodeURIComponent(view.shoe) + "/" + encodeURIComponent(coup);
  }

  function cardEl(code) {
    if (!code) return el("span", "card unread", "?");
    const rank = code[0] === "T" ? "10" : code[0];
    const suit = code[1];
    const c = el("span", "card" + (suit === "H" || suit === "D" ? " red" : ""), rank + (SUITS[suit] || suit));
    c.title = code;
    return c;
  }

  // One road: cells {x, y, ...} on a six-row board; the latest columns
  // are shown when the road is wider than the box.
  function drawRoad(id, cells, drawCell) {
    const box = $(id);
    // as many columns as the screen has room for (at least data-cols), each
    // cell sized so that the columns fill the box exactly: every road's
    // right edge then lines up with the others'
    if (!box.dataset.cell) box.dataset.cell = parseFloat(getComputedStyle(box).getPropertyValue("--cell")) || 20;
    const nominal = parseFloat(box.dataset.cell);
    const avail = box.parentElement.clientWidth - 2; // the road's 1px borders
    const cols = Math.max(parseInt(box.dataset.cols, 10), Math.floor(avail / nominal));
    const size = Math.max(4, avail / cols);
    box.style.setProperty("--cell", size + "px");
    const width = cells.reduce((m, c) => Math.max(m, c.x + 1), 0);
    const first = Math.max(0, width + 1 - cols);
    box.replaceChildren();
    box.style.gridTemplateColumns = "repeat(" + cols + ", var(--cell))";
    box.style.gridTemplateRows = "repeat(" + ROWS + ", var(--cell))";
    for (const c of cells) {
      if (c.x < first) continue;
      const href = coupLink(c.coup);
      const cell = el(href ? "a" : "div", "cell");
      if (href) cell.href = href;
      cell.style.gridColumn = String(c.x - first + 1);
      cell.style.gridRow = String(c.y + 1);
      cell.dataset.x = c.x;
      cell.dataset.y = c.y;
      if (c.coup !== null && c.coup !== undefined) {
        cell.dataset.coup = c.coup;
        cell.title = "Coup " + c.coup;
      }
      drawCell(cell, c);
      box.appendChild(cell);
    }
  }

  function pairs(cell, c) {
    if (c.bp) cell.appendChild(el("span", "dot bp"));
    if (c.pp) cell.appendChild(el("span", "dot pp"));
  }

  function drawRoads(r) {
    drawRoad("bead-plate", r.bead_plate, (cell, c) => {
      cell.classList.add("bead", "w-" + c.w);
      cell.dataset.w = c.w;
      cell.appendChild(el("span", "letter", c.w));
      pairs(cell, c);
    });
    drawRoad("big-road", r.big_road, (cell, c) => {
      cell.classList.add("ring", "w-" + c.w);
      cell.dataset.w = c.w;
      cell.dataset.ties = c.ties;
      if (c.ties) {
        cell.appendChild(el("span", "tie-slash"));
        if (c.ties > 1) cell.appendChild(el("span", "tie-count", c.ties));
      }
      pairs(cell, c);
    });
    const kinds = { "big-eye-boy": ["big_eye_boy", "ring"], "small-road": ["small_road", "disc"], "cockroach-pig": ["cockroach_pig", "slash"] };
    for (const [id, [key, shape]] of Object.entries(kinds)) {
      drawRoad(id, r[key], (cell, c) => {
        cell.classList.add(shape, "c-" + c.c);
        cell.dataset.c = c.c;
      });
    }
  }

  function hand(name, h, won) {
    const box = el("div", "hand " + name.toLowerCase() + (won ? " won" : ""));
    box.appendChild(el("div", "hand-name", name));
    const cards = el("div", "cards");
    for (const c of h.cards) cards.appendChild(cardEl(c));
    box.appendChild(cards);
    box.appendChild(el("div", "total", h.total));
    return box;
  }

  // A last coup the board did not see (it ended while the board was away
  // from the broker, or before it started): what the retained topics say,
  // the rest marked unknown rather than left over from an older coup.
  function drawUnseen(out, last) {
    if (last.void) {
      const v = el("div", "void-mark", "VOID");
      v.id = "last-void";
      out.appendChild(v);
    } else {
      const w = el("div", "winner w-" + last.winner, (NAMES[last.winner] || last.winner) + (last.winner === "T" ? "" : " wins"));
      w.id = "last-winner";
      w.dataset.w = last.winner;
      out.appendChild(w);
      const notes = [];
      if (last.player_pair) notes.push("Player pair");
      if (last.banker_pair) notes.push("Banker pair");
      if (notes.length) out.appendChild(el("div", "notes", notes.join(" \u00b7 ")));
    }
    const why = el("p", "muted", last.void
      ? "A coup was voided while the board was away: its number, code and cards are unknown"
      : "Settled while the board was away: its number, cards and totals are unknown");
    why.id = "last-unseen";
    out.appendChild(why);
    if (last.void_unseen) out.appendChild(el("p", "muted", "A coup was also voided meanwhile; which came last is unknown"));
  }

  function changesText(changes) {
    return (changes || []).map((c) => c.position + " " + c.was + "\u2192" + c.card).join(", ");
  }

  // The latest correction of a settled coup, until the next coup ends:
  // "COUP 2 CORRECTED: Banker → Player (P1 6S→8D; tape: P1 was 8D)"
  function drawCorrection(v) {
    const c = v.correction;
    if (!c) {
      show("banner-corrected", false);
      return;
    }
    const name = (w) => (w ? NAMES[w] || w : "?");
    const why = [changesText(c.changes), c.reason].filter((x) => x).join("; ");
    show("banner-corrected", true, "COUP " + c.coup + " CORRECTED: " + name(c.was) + " \u2192 " + name(c.winner) +
      (why ? " (" + why + ")" : ""));
  }

  function drawLast(v) {
    const last = v.last;
    const out = $("last-body");
    out.replaceChildren();
    const unseen = !!(last && last.seen === false);
    $("last-title").textContent = unseen && !last.void ? "Last settled coup" : "Last coup";
    $("last-coup").textContent = last && last.coup !== null ? String(last.coup) : unseen ? "?" : "";
    $("last").classList.toggle("void", !!(last && last.void));
    $("last").classList.toggle("unseen", unseen);
    if (!last) {
      out.appendChild(el("p", "muted", "No coup yet in this shoe"));
      return;
    }
    if (unseen) {
      drawUnseen(out, last);
      return;
    }
    if (last.void) {
      const v = el("div", "void-mark", "VOID");
      v.id = "last-void";
      out.appendChild(v);
      out.appendChild(el("div", "muted", last.void.code + (last.void.detail ? ": " + last.void.detail : "")));
      const cards = el("div", "cards");
      for (const c of last.cards || []) cards.appendChild(cardEl(c.card));
      out.appendChild(cards);
      return;
    }
    const hands = el("div", "hands");
    hands.appendChild(hand("Player", last.player, last.winner === "P"));
    hands.appendChild(hand("Banker", last.banker, last.winner === "B"));
    out.appendChild(hands);
    const w = el("div", "winner w-" + last.winner, (NAMES[last.winner] || last.winner) + (last.winner === "T" ? "" : " wins"));
    w.id = "last-winner";
    w.dataset.w = last.winner;
    out.appendChild(w);
    const notes = [];
    if (last.demo) notes.push("demo coup (not settled)");
    if (last.natural) notes.push("natural");
    if (last.player_pair) notes.push("Player pair");
    if (last.banker_pair) notes.push("Banker pair");
    for (const h of last.hits || []) notes.push(h + "!");
    if (notes.length) out.appendChild(el("div", "notes", notes.join(" \u00b7 ")));
    if (last.corrected) {
      // a supervisor's correction of this coup: what it replaced, and why
      const n = el("div", "notes corrected", "Corrected by supervisor: " + changesText(last.changes) +
        (last.reason ? " (" + last.reason + ")" : ""));
      n.id = "last-corrected";
      out.appendChild(n);
    }
    const href = coupLink(last.coup);
    if (href) {
      const a = el("a", "timeline", "Timeline of coup " + last.coup);
      a.href = href;
      out.appendChild(a);
    }
  }

  function drawDealing(v) {
    const cur = v.current;
    show("dealing", !!cur);
    if (!cur) return;
    // with the table offline nothing is being dealt that the board can see:
    // the half-dealt coup is shown as it was, not as live
    const offline = v.status === "offline";
    $("dealing").classList.toggle("stale", offline);
    $("dealing-title").textContent = offline ? "When the table went offline: coup" : "Dealing coup";
    $("dealing-coup").textContent = String(cur.coup);
    const box = $("dealing-cards");
    box.replaceChildren();
    for (const c of cur.cards) {
      const s = el("span", "pos");
      s.appendChild(el("small", null, c.position));
      s.appendChild(cardEl(c.card));
      box.appendChild(s);
    }
    show("dealing-missed", !!cur.missed);
  }

  function drawTally(v) {
    const t = v.tally;
    $("tally-banker").textContent = t.banker;
    $("tally-player").textContent = t.player;
    $("tally-tie").textContent = t.tie;
    $("tally-banker-pair").textContent = t.banker_pair;
    $("tally-player-pair").textContent = t.player_pair;
    $("tally-natural").textContent = t.natural;
    $("tally-void").textContent = t.void;
    const sb = $("side-bets");
    sb.replaceChildren();
    for (const s of v.side_bets) {
      const tr = el("tr", "side-bet");
      tr.appendChild(el("th", null, s.label));
      const td = el("td", null, s.hits);
      td.dataset.bet = s.bet;
      tr.appendChild(td);
      sb.appendChild(tr);
    }
  }

  // Both views of the odds (docs/events.md), side by side: every card read
  // (shoe) and what a player can count (counter), each the latest
  // odds.update of its view; a view not received yet is said so.
  const VIEWS = ["shoe", "counter"];

  function drawOdds(v) {
    show("odds", !!v.odds);
    if (!v.odds) return;
    const names = [];
    for (const name of VIEWS) {
      const o = v.odds[name];
      $("odds-" + name + "-note").textContent = !o ? "not received yet" :
        "coup " + o.coup + (o.cards_left !== null ? ", " + o.cards_left + " cards" : "");
      for (const bet of Object.keys(o ? o.bets : {})) if (!names.includes(bet)) names.push(bet);
    }
    const body = $("odds-body");
    body.replaceChildren();
    for (const bet of names) {
      const tr = el("tr");
      tr.dataset.bet = bet;
      tr.appendChild(el("th", null, BETS[bet] || bet));
      for (const name of VIEWS) {
        const b = v.odds[name] ? v.odds[name].bets[bet] : undefined;
        if (!b) {
          tr.appendChild(el("td", "none v-" + name, "\u2013"));
          tr.appendChild(el("td", "none v-" + name, "\u2013"));
          continue;
        }
        tr.appendChild(el("td", "v-" + name, (100 * b.win).toFixed(1) + "%"));
        tr.appendChild(el("td", "v-" + name + (b.ev > 0 ? " plus" : ""), (b.ev >= 0 ? "+" : "") + (100 * b.ev).toFixed(2) + "%"));
      }
      body.appendChild(tr);
    }
  }

  function clock(deadline) {
    const t = new Date(deadline);
    return Number.isFinite(t.getTime()) ? t.toISOString().slice(11, 19) + " UTC" : null;
  }

  function secondsLeft(deadline) {
    const t = Date.parse(deadline);
    return Number.isFinite(t) ? Math.max(0, Math.round((t - Date.now()) / 1000)) : null;
  }

  function drawState(v) {
    const offline = v.status === "offline";
    show("banner-offline", offline);
    const c = $("badge-controller");
    c.textContent = "controller " + (v.status || "?");
    c.className = "badge " + (v.status === "online" ? "ok" : v.status === "offline" ? "bad" : "");
    const d = $("badge-device");
    const dev = v.device; // device.status is not retained: unknown until the daemon reports it
    d.textContent = "shoe " + dev.state + (dev.was ? " (was " + dev.was + ")" : "");
    d.dataset.state = dev.state;
    d.className = "badge " + (dev.state === "online" ? "ok" : dev.state === "unknown" ? "unknown" : "bad");
    const devDown = !offline && (dev.state === "offline" || dev.state === "fault");
    show("banner-device", !!devDown, devDown ? "SHOE " + dev.state.toUpperCase() + (dev.code ? " (" + dev.code + ")" : "") : "");
    if (v.awaiting.length) {
      const parts = v.awaiting.map((a) => {
        if (offline) {
          // no countdown: the controller that keeps the deadline is gone
          const at = a.deadline ? clock(a.deadline) : null;
          return "coup " + a.coup + ": " + a.code + (at ? " (deadline " + at + ")" : "");
        }
        const s = a.deadline ? secondsLeft(a.deadline) : null;
        return "coup " + a.coup + ": " + a.code + (s !== null ? " (" + s + " s left)" : "");
      });
      show("banner-misdeal", true, "MISDEAL: awaiting supervisor \u2014 " + parts.join("; ") +
        (offline ? " \u2014 the table is offline: its controller decides when it is back" : ""));
    } else {
      show("banner-misdeal", false);
    }
    show("banner-ended", v.ended, "SHOE ENDED" + (v.end_reason ? " (" + v.end_reason + ")" : ""));
    show("banner-broker", !v.broker);
    $("shoe").textContent = v.shoe || "\u2013";
    $("coup").textContent = v.coup !== null ? v.coup : "\u2013";
    $("cards-left").textContent = v.cards_left !== null ? v.cards_left : "\u2013";
    show("cut", v.cut_last !== null); // the cut card is out: the last coup of the shoe
    $("cut-last").textContent = v.cut_last !== null ? v.cut_last : "";
    body.classList.toggle("is-offline", offline);
  }

  function render(v) {
    view = v;
    drawState(v);
    drawCorrection(v);
    drawLast(v);
    drawDealing(v);
    drawTally(v);
    drawOdds(v);
    drawRoads(v.roads);
    body.dataset.version = v.version;
    body.classList.remove("loading");
  }

  // The view as the board knew it when it served the page: the first paint
  // shows it (the stream's events then replace it)
  function first() {
    try {
      if (body.dataset.view) render(JSON.parse(body.dataset.view));
    } catch (e) {
      // a view the page cannot read waits for the stream's first event
    }
    body.classList.remove("loading");
  }
  first();

  const source = new EventSource("/api/table/" + encodeURIComponent(table) + "/events");
  source.addEventListener("view", (e) => {
    show("banner-stream", false);
    render(JSON.parse(e.data));
  });
  source.addEventListener("error", () => show("banner-stream", true));
  window.addEventListener("resize", () => { if (view) render(view); });
  // the misdeal countdown moves between updates (not while the table is offline)
  setInterval(() => { if (view && view.awaiting.length && view.status !== "offline") drawState(view); }, 1000);
})();
