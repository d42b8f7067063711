// The question page and the dashboard: a countdown, answering without a reload, live updates
// (a moved deadline updates the countdown in place, keeping what the user typed).
// Served from the binary as a file of its own: the page's Content-Security-Policy allows no
// inline script.
"use strict";

function fmt(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + String(s % 60).padStart(2, "0") + "s";
  return Math.floor(s / 3600) + "h " + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
}

// When the question's wait ends (ms since the epoch, by this page's clock); null for none.
let deadline = null;
let ticking = null;
// When the page last heard that the deadline moved.
let movedAt = 0;

// What the page says once the deadline passed (the broker's words: they name the default).
function timedOut(main) {
  return main.dataset.timedOut || "deadline passed";
}

// "+5 min" only while a deadline is ahead: with none, or one passed, there is no time to add.
function canExtend(yes) {
  const b = document.querySelector("button[value=extend]");
  if (b) b.hidden = !yes;
}

function countdown(main) {
  const el = document.getElementById("countdown");
  clearTimeout(ticking);
  if (!el || deadline === null) return;
  const tick = () => {
    if (main.classList.contains("closed")) return;
    const left = deadline - Date.now();
    el.textContent = left > 0 ? fmt(left) + " left" : timedOut(main);
    el.classList.toggle("urgent", left < 60000);
    canExtend(left > 0);
    if (left > 0) ticking = setTimeout(tick, 1000 - (left % 1000) || 1000);
  };
  tick();
}

// "5 more minutes", "1 more hour": how far the deadline moved, in the words the buttons use.
function moved(ms) {
  const min = Math.round(ms / 60000);
  if (min >= 60 && min % 60 === 0) return min / 60 + (min === 60 ? " more hour" : " more hours");
  if (min >= 1) return min + (min === 1 ? " more minute" : " more minutes");
  return "The deadline moved";
}

// The question changed while the page is open (its deadline moved: "+5 min" here, Ctrl+E in
// the terminal, "+1 hour" in Telegram). Updated in place: what the user typed and picked stays.
function changed(main, data) {
  let now;
  try { now = JSON.parse(data); } catch (e) { return; }
  if (main.classList.contains("closed")) return;
  const el = document.getElementById("countdown");
  const skip = document.querySelector("button[value=skip]");
  if (skip) skip.hidden = now.live === false;
  if (now.live === false) {
    clearTimeout(ticking);
    deadline = null;
    if (el) { el.textContent = main.dataset.stopped; el.classList.remove("urgent"); }
    canExtend(false);
    show("The loop stopped. Your answer is kept for its next run.", false);
    return;
  }
  if (now.timed_out) {
    clearTimeout(ticking);
    deadline = null;
    if (el) el.textContent = timedOut(main);
    canExtend(false);
    return;
  }
  if (now.left_ms === null) {
    clearTimeout(ticking);
    deadline = null;
    if (el) { el.textContent = "no deadline"; el.classList.remove("urgent"); }
    canExtend(false);
    show("No deadline now: take your time.", false);
    return;
  }
  const before = deadline;
  movedAt = Date.now();
  deadline = movedAt + Number(now.left_ms);
  countdown(main);
  const left = fmt(deadline - Date.now()) + " left";
  show(before === null ? "The deadline moved: " + left : moved(deadline - before) + ": " + left, false);
}

function show(text, error) {
  const r = document.getElementById("result");
  r.textContent = text;
  r.classList.toggle("error", !!error);
}

// The question closed. `elsewhere`: not by this page's answer, so what the user had written
// here was not sent: it stays on the page, read-only, for them to copy.
function close(main, text, elsewhere) {
  main.classList.add("closed");
  show(text, false);
  const el = document.getElementById("countdown");
  if (el) el.textContent = "closed";
  const draft = document.getElementById("text");
  if (elsewhere && draft && draft.value.trim() !== "") {
    draft.readOnly = true;
    main.classList.add("kept");
    const label = document.querySelector("label.note");
    if (label) label.textContent = "What you wrote here (not sent)";
  }
}

// A single-choice pick can be cleared, for an answer in the user's own words.
function unpick(form) {
  const button = document.getElementById("unpick");
  if (!button) return;
  const radios = Array.from(form.querySelectorAll("input[type=radio][name=option]"));
  const update = () => { button.hidden = !radios.some((r) => r.checked); };
  radios.forEach((r) => r.addEventListener("change", update));
  button.addEventListener("click", () => {
    radios.forEach((r) => { r.checked = false; });
    update();
    form.querySelector("textarea").focus();
  });
  update();
}

// Says at once when the answer is over the broker's limit (in UTF-8 bytes, as it counts).
function sizeCheck(main, form) {
  const max = Number(main.dataset.maxBytes);
  const note = document.getElementById("size");
  const area = form.querySelector("textarea");
  if (!max || !note || !area || !window.TextEncoder) return;
  const encoder = new TextEncoder();
  const check = () => {
    const bytes = encoder.encode(area.value.trim()).length;
    note.hidden = bytes <= max;
    note.textContent = "Too long to send: " + bytes + " bytes, more than the " + max +
      " an answer may have. Shorten it, or put the long part in a file in the project and answer with its path.";
  };
  area.addEventListener("input", check);
  check();
}

function answerForm(main) {
  const form = document.getElementById("answer");
  if (!form) return;
  unpick(form);
  sizeCheck(main, form);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const button = ev.submitter || form.querySelector("button.send");
    const picked = Array.from(form.querySelectorAll("input[name=option]:checked")).map((i) => Number(i.value));
    const note = form.querySelector("textarea").value;
    let body = picked.length ? { options: picked, answer: note } : { answer: note };
    if (button.name === "action") body = { action: button.value };
    button.disabled = true;
    const sent = Date.now();
    try {
      const res = await fetch(main.dataset.post, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
        credentials: "same-origin",
      });
      const reply = await res.json().catch(() => ({ message: "The broker answered HTTP " + res.status + "." }));
      // 202: the loop was asked for more time and the question stays open. The stream's news
      // of the moved deadline says more than the reply, and may have come first.
      if (res.status === 202) {
        if (!(movedAt >= sent)) show(reply.message, false);
      } else if (res.ok) close(main, reply.message, false);
      else if (res.status === 409) {
        close(main, reply.message, true);
        show(reply.message, true);
      }
      else show(reply.message, true);
    } catch (e) {
      show("Could not reach the broker: " + e.message, true);
    } finally {
      button.disabled = false;
    }
  });
}

function live(main) {
  if (!main.dataset.events || !window.EventSource) return;
  const source = new EventSource(main.dataset.events);
  // The page's own answer already says how it closed; the stream's news of the same close may
  // arrive after that reply and must not overwrite it.
  source.addEventListener("closed", (ev) => {
    source.close();
    if (!main.classList.contains("closed")) close(main, "This question closed: " + ev.data + ".", true);
  });
  source.addEventListener("changed", (ev) => changed(main, ev.data));
  // Marked for whoever waits on the page (a test): from now on, news reaches it.
  source.addEventListener("open", () => { main.dataset.live = "open"; });
}

// The dashboard's stream sends the whole list of loops (HTML the broker made and escaped, as
// it made the page) at once and whenever a loop starts, ends, asks or is answered.
function liveDashboard(main) {
  if (!main.dataset.events || !window.EventSource) return;
  const source = new EventSource(main.dataset.events);
  source.addEventListener("loops", (ev) => {
    main.innerHTML = ev.data;
    ageing(main);
    // Marked for whoever waits on the page (a test): the stream's first list is in.
    main.dataset.live = "open";
  });
}

// Each running loop's elapsed time counts on, from when the broker measured it (the stream
// sends nothing when only the clock moved).
let ages = null;
function ageing(main) {
  const now = Date.now();
  main.querySelectorAll("[data-elapsed-ms]").forEach((el) => {
    el.dataset.since = String(now - Number(el.dataset.elapsedMs));
  });
  if (ages !== null) return;
  ages = setInterval(() => {
    main.querySelectorAll("[data-since]").forEach((el) => {
      el.textContent = fmt(Date.now() - Number(el.dataset.since));
    });
  }, 1000);
}

document.addEventListener("DOMContentLoaded", () => {
  const main = document.querySelector("main");
  if (!main) return;
  if (main.classList.contains("dashboard")) {
    ageing(main);
    liveDashboard(main);
    return;
  }
  if (main.dataset.leftMs) deadline = Date.now() + Number(main.dataset.leftMs);
  countdown(main);
  answerForm(main);
  live(main);
});
