// The chat page: one websocket per session, replayed from the log and then live.
//
// Every event frame carries its seq and a continuation token. The page keeps
// the last token (also in localStorage, per session) and reconnects with it
// after a drop, with exponential backoff and jitter, so the server replays
// exactly what was missed. Frames at or below the last seq are ignored, so a
// replay overlapping what is on screen can never duplicate text.
(function () {
  "use strict";

  const root = document.getElementById("chat");
  const sessionId = root.dataset.session;
  const storageKey = "agentsite.stream." + sessionId;
  const md = window.agentsiteMarkdown;
  const approvals = window.agentsiteApprovals;
  const $ = (id) => document.getElementById(id);
  const log = $("log");
  const conn = $("conn");
  const composer = $("composer");
  const input = $("message");
  const interruptButton = $("interrupt");
  const runState = $("run-state");
  const TERMINAL = new Set(["done", "failed", "cancelled", "timed_out"]);

  const state = {
    socket: null,
    lastSeq: 0,
    token: "",
    attempt: 0,
    reconnectTimer: null,
    leaving: false,
    outbox: [],
    bubble: null, // the assistant bubble deltas are streaming into
    toolCards: new Map(), // tool_call id -> card element
    jobCards: new Map(), // job_id -> card element
    jobPartials: new Map(), // job_id -> partial results fetched so far
    approvalCards: new Map(), // approval id -> card element
    seqs: [], // every seq rendered, in order (inspected by the browser tests)
  };

  // --- connection ---------------------------------------------------------------------------

  function socketUrl() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const after = state.token ? "?after=" + encodeURIComponent(state.token) : "";
    return scheme + "//" + location.host + "/ws/sessions/" + sessionId + "/" + after;
  }

  function setConn(name, text) {
    conn.dataset.state = name;
    conn.textContent = text;
  }

  function connect() {
    state.reconnectTimer = null;
    const socket = new WebSocket(socketUrl());
    state.socket = socket;
    socket.onopen = () => {
      state.attempt = 0;
      setConn("live", "live");
      while (state.outbox.length && socket.readyState === WebSocket.OPEN) socket.send(state.outbox.shift());
    };
    socket.onmessage = (message) => {
      let frame;
      try {
        frame = JSON.parse(message.data);
      } catch (err) {
        return;
      }
      if (frame.type) reply(frame);
      else event(frame);
    };
    socket.onclose = (close) => {
      if (state.socket !== socket) return;
      state.socket = null;
      if (state.leaving) return;
      if (close.code === 4401) {
        location.href = "/login/?next=" + encodeURIComponent(location.pathname);
        return;
      }
      if (close.code === 4404) {
        setConn("down", "not found");
        notice("This session does not exist or is not yours.");
        return;
      }
      if (close.code === 4400) {
        // The stored position is unusable: start again from the beginning.
        forget();
        location.reload();
        return;
      }
      scheduleReconnect();
    };
  }

  function scheduleReconnect() {
    if (state.reconnectTimer) return;
    setConn("reconnecting", "reconnecting…");
    const base = Math.min(10000, 400 * 2 ** state.attempt);
    const delay = base / 2 + Math.random() * base; // jitter: spread a crowd of reconnects
    state.attempt += 1;
    state.reconnectTimer = setTimeout(connect, delay);
  }

  // Going offline does not end a socket at once: its closing handshake can stall
  // until the network is back. The page drops it at once and shows that it is
  // reconnecting; the old socket's close event, whenever it comes, is ignored.
  function dropSocket() {
    const socket = state.socket;
    if (!socket) return;
    state.socket = null;
    socket.close();
    scheduleReconnect();
  }

  window.addEventListener("offline", dropSocket);
  window.addEventListener("online", () => {
    if (!state.reconnectTimer) return;
    clearTimeout(state.reconnectTimer); // back online: no need to wait for the backoff
    connect();
  });

  function send(frame) {
    const text = JSON.stringify(frame);
    if (state.socket && state.socket.readyState === WebSocket.OPEN) state.socket.send(text);
    else state.outbox.push(text);
  }

  function remember(frame) {
    state.lastSeq = frame.seq;
    state.token = frame.token;
    try {
      localStorage.setItem(storageKey, JSON.stringify({ seq: frame.seq, token: frame.token, at: Date.now() }));
    } catch (err) {
      /* private mode or full storage: the in-memory token still works */
    }
  }

  function forget() {
    try {
      localStorage.removeItem(storageKey);
    } catch (err) {
      /* nothing stored */
    }
  }

  function storedPosition() {
    try {
      return JSON.parse(localStorage.getItem(storageKey) || "null");
    } catch (err) {
      return null;
    }
  }

  // --- rendering --------------------------------------------------------------------------------

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // The chat follows new messages down while the reader is at the bottom, but not while
  // they are at a pending approval card (the pointer on it, or typing in it): following
  // would move its buttons from under the pointer, and a click meant for Approve or
  // Reject would land elsewhere.
  function atWorkOnACard() {
    if (log.querySelector('.approval-card[data-status="pending"]:hover')) return true;
    const active = document.activeElement;
    return Boolean(active && active.closest && active.closest('.approval-card[data-status="pending"]'));
  }

  function nearBottom(margin) {
    return window.innerHeight + window.scrollY >= document.body.scrollHeight - margin;
  }

  function follow(node, wasNearBottom) {
    if (wasNearBottom && !atWorkOnACard()) node.scrollIntoView({ block: "end" });
  }

  function append(node) {
    const near = nearBottom(120);
    log.appendChild(node);
    follow(node, near);
  }

  function notice(text) {
    const box = $("notice");
    box.textContent = text;
    box.hidden = false;
  }

  function event(frame) {
    if (frame.seq <= state.lastSeq) return; // already on screen
    remember(frame);
    state.seqs.push(frame.seq);
    const lastVisit = Number(root.dataset.lastVisitSeq || 0);
    if (lastVisit && frame.seq === lastVisit + 1 && !log.querySelector(".since")) {
      closeBubble();
      append(el("li", "since", "new since your last visit"));
    }
    const handler = HANDLERS[frame.kind];
    if (handler) handler(frame.payload || {}, frame);
  }

  function userMessage(payload, frame) {
    closeBubble();
    // A client's answers to the model's calls of its own tools close their cards.
    for (const result of payload.tool_results || []) clientAnswer(result);
    if (!payload.text && payload.tool_results) return;
    const item = el("li", "msg user");
    item.dataset.seq = frame.seq;
    item.appendChild(el("div", "bubble", payload.text || ""));
    append(item);
  }

  function clientAnswer(result) {
    const card = state.toolCards.get(result.tool_call_id);
    if (!card) return;
    const status = card.querySelector(".tool-status");
    status.textContent = "answered by the client";
    status.className = "tool-status ok";
    const details = el("details", "tool-output");
    details.appendChild(el("summary", "", compactJson(result.output, 100)));
    details.appendChild(el("pre", "", result.output));
    card.appendChild(details);
  }

  function openBubble(frame) {
    if (!state.bubble) {
      const item = el("li", "msg assistant streaming");
      item.dataset.seq = frame.seq;
      const bubble = el("div", "bubble markdown");
      item.appendChild(bubble);
      append(item);
      state.bubble = { item, bubble, text: "", view: md.stream(bubble) };
    }
    return state.bubble;
  }

  function renderBubble(b) {
    b.view.update(b.text);
  }

  function assistantDelta(payload, frame) {
    const b = openBubble(frame);
    b.text += payload.text || "";
    b.item.dataset.streamed = b.text;
    renderBubble(b);
    follow(b.item, nearBottom(160));
  }

  function assistantMessage(payload, frame) {
    const b = openBubble(frame);
    // The segment's full text is authoritative; deltas were a preview of it.
    b.text = payload.text || "";
    renderBubble(b);
    b.item.classList.remove("streaming");
    b.item.dataset.final = b.text;
    if (payload.interrupted) b.item.appendChild(el("div", "note", "interrupted"));
    state.bubble = null;
  }

  function closeBubble() {
    if (state.bubble) state.bubble.item.classList.remove("streaming");
    state.bubble = null;
  }

  function compactJson(value, limit) {
    let text;
    try {
      text = JSON.stringify(value);
    } catch (err) {
      text = String(value);
    }
    return text.length > limit ? text.slice(0, limit - 1) + "…" : text;
  }

  function toolCall(payload, frame) {
    closeBubble();
    const card = el("li", "tool-card");
    card.dataset.seq = frame.seq;
    const head = el("div", "tool-head");
    head.appendChild(el("span", "tool-icon", "⚙"));
    head.appendChild(el("code", "tool-name", payload.name || "tool"));
    head.appendChild(el("span", "tool-args muted", compactJson(payload.input || {}, 120)));
    const status = el("span", "tool-status muted", payload.client ? "waiting for the client" : "…");
    head.appendChild(status);
    card.appendChild(head);
    state.toolCards.set(payload.id, card);
    append(card);
  }

  function toolResult(payload, frame) {
    const card = state.toolCards.get(payload.tool_call_id);
    const output = payload.output;
    if (!card) return;
    const status = card.querySelector(".tool-status");
    if (payload.is_error) {
      status.textContent = "error";
      status.className = "tool-status bad";
      const error = output && output.error ? output.error.message || output.error.code : compactJson(output, 200);
      card.appendChild(el("div", "tool-output error", error));
      return;
    }
    if (output && typeof output === "object" && output.status === "awaiting_answer") {
      status.textContent = "waiting for your answer";
      return;
    }
    if (output && typeof output === "object" && output.job_id) {
      status.textContent = output.status === "awaiting_approval" ? "waiting for your approval" : "started job";
      const job = jobCard(output.job_id, payload.name, card);
      if (output.status === "awaiting_approval" && job.dataset.status === "queued") {
        job.querySelector(".status").textContent = "awaiting approval";
      }
      return;
    }
    status.textContent = "ok";
    status.className = "tool-status ok";
    const details = el("details", "tool-output");
    const summary = output && typeof output === "object" && output.summary ? output.summary : compactJson(output, 100);
    details.appendChild(el("summary", "", summary));
    details.appendChild(el("pre", "", JSON.stringify(output, null, 2)));
    card.appendChild(details);
  }

  function jobCard(jobId, tool, parent) {
    let card = state.jobCards.get(jobId);
    if (card) return card;
    card = el("div", "job-card");
    card.dataset.job = jobId;
    card.dataset.status = "queued";
    card.innerHTML =
      '<div class="job-head"><a class="job-link"></a><span class="job-tool"></span>' +
      '<span class="status status-queued">queued</span><button type="button" class="stop secondary">Stop</button></div>' +
      '<div class="progress indeterminate"><div class="bar"></div></div>' +
      '<div class="job-message muted"></div><div class="job-summary"></div>' +
      '<ol class="partials"></ol><div class="job-actions"></div>';
    const link = card.querySelector(".job-link");
    link.href = "/jobs/" + encodeURIComponent(jobId) + "/";
    link.textContent = jobId;
    card.querySelector(".job-tool").textContent = tool || "";
    card.querySelector(".stop").addEventListener("click", (e) => {
      e.target.disabled = true;
      e.target.textContent = "Stopping…";
      send({ type: "stop_job", job_id: jobId });
    });
    state.jobCards.set(jobId, card);
    if (parent) parent.appendChild(card);
    else {
      const item = el("li", "tool-card");
      item.appendChild(card);
      append(item);
    }
    return card;
  }

  function jobEvent(payload) {
    if (!payload.job_id) return;
    const card = jobCard(payload.job_id, payload.tool);
    const status = payload.status || card.dataset.status;
    card.dataset.status = status;
    const badge = card.querySelector(".status");
    badge.textContent = status;
    badge.className = "status status-" + status;
    const progress = payload.progress || {};
    const bar = card.querySelector(".progress");
    const fraction = typeof progress.fraction === "number" ? Math.max(0, Math.min(1, progress.fraction)) : null;
    if (status === "done") {
      bar.classList.remove("indeterminate");
      bar.firstChild.style.width = "100%";
    } else if (fraction !== null) {
      bar.classList.remove("indeterminate");
      bar.firstChild.style.width = (fraction * 100).toFixed(1) + "%";
    }
    bar.dataset.fraction = fraction === null ? "" : String(fraction);
    if (progress.message) card.querySelector(".job-message").textContent = progress.message;
    if (payload.partial_count) fetchPartials(payload.job_id, payload.partial_count, card);
    if (TERMINAL.has(status)) finishJob(card, payload);
  }

  function finishJob(card, payload) {
    card.classList.add("finished");
    card.querySelector(".progress").classList.remove("indeterminate");
    const stop = card.querySelector(".stop");
    if (stop) stop.remove();
    if (payload.summary) card.querySelector(".job-summary").textContent = payload.summary;
    if (payload.error && payload.error.message) {
      card.querySelector(".job-summary").appendChild(el("div", "error", payload.error.message));
    }
    if (payload.tool === "write_report" && payload.status === "done") reportActions(card, payload.job_id);
  }

  function reportActions(card, jobId) {
    const actions = card.querySelector(".job-actions");
    if (actions.childElementCount) return;
    const read = el("button", "secondary read-report", "Read report");
    read.type = "button";
    const download = el("a", "button download-report", "Download .md");
    download.href = "/jobs/" + encodeURIComponent(jobId) + "/report.md";
    download.setAttribute("download", "");
    const body = el("div", "report markdown");
    body.hidden = true;
    read.addEventListener("click", async () => {
      if (!body.dataset.loaded) {
        const response = await fetch("/jobs/" + encodeURIComponent(jobId) + "/report", { credentials: "same-origin" });
        // The server renders the markdown with raw HTML disabled: this fragment is safe.
        body.innerHTML = response.ok ? await response.text() : "<p class='error'>The report could not be loaded.</p>";
        body.dataset.loaded = "1";
      }
      body.hidden = !body.hidden;
      read.textContent = body.hidden ? "Read report" : "Hide report";
    });
    actions.append(read, download);
    card.appendChild(body);
  }

  async function fetchPartials(jobId, count, card) {
    const fetched = state.jobPartials.get(jobId) || { next: 0, busy: false };
    state.jobPartials.set(jobId, fetched);
    if (fetched.busy || fetched.next >= count) return;
    fetched.busy = true;
    try {
      const url = "/api/jobs/" + encodeURIComponent(jobId) + "/result?cursor=" + fetched.next + "&limit=200";
      const response = await fetch(url, { credentials: "same-origin" });
      if (!response.ok) return;
      const page = await response.json();
      const list = card.querySelector(".partials");
      for (const item of page.items || []) {
        list.appendChild(el("li", "", partialText(item)));
        while (list.childElementCount > 50) list.removeChild(list.firstChild);
      }
      fetched.next = page.next_cursor;
    } catch (err) {
      /* a later progress event retries */
    } finally {
      fetched.busy = false;
    }
  }

  function partialText(item) {
    if (item && typeof item === "object") {
      const name = item.nodeid || item.test || item.name || item.url || item.heading || item.title;
      const outcome = item.outcome || item.status || item.result;
      if (name) return outcome !== undefined ? name + " — " + outcome : String(name);
      if (item.summary) return item.summary;
    }
    return compactJson(item, 160);
  }

  function runStarted() {
    runState.hidden = false;
    interruptButton.disabled = false;
  }

  function runFinished(payload) {
    closeBubble();
    runState.hidden = true;
    interruptButton.disabled = true;
    if (payload.status === "cancelled") append(el("li", "system-note", "Turn interrupted."));
  }

  // A stopping worker handed the turn back: what its attempt wrote is superseded
  // by the next attempt, which another worker starts from the same messages.
  function runRequeued(payload) {
    closeBubble();
    const after = Number(payload.superseded_after_seq || 0);
    document.querySelectorAll("li.msg.assistant").forEach((item) => {
      if (Number(item.dataset.seq) > after) item.classList.add("superseded");
    });
    append(el("li", "system-note", "This turn moved to another worker and starts again."));
  }

  // A request for the user's answer: a card with its controls, redrawn in place by its
  // decision, whether made here, through the API or in the admin.
  function approvalRequested(payload) {
    closeBubble();
    if (state.approvalCards.has(payload.id)) return;
    const card = approvals.render(payload);
    state.approvalCards.set(payload.id, card);
    append(card);
  }

  function approvalDecided(payload) {
    const card = state.approvalCards.get(payload.id);
    if (card) approvals.update(card, payload);
    else approvalRequested(payload);
    const tool = state.toolCards.get(payload.tool_call_id);
    if (tool) tool.querySelector(".tool-status").textContent = payload.status;
    const job = payload.job_id ? state.jobCards.get(payload.job_id) : null;
    if (job && job.dataset.status === "queued") job.querySelector(".status").textContent = "queued";
  }

  function errorEvent(payload) {
    closeBubble();
    append(el("li", "system-note error", (payload.code ? payload.code + ": " : "") + (payload.message || "error")));
  }

  const HANDLERS = {
    user_message: userMessage,
    assistant_delta: assistantDelta,
    assistant_message: assistantMessage,
    tool_call: toolCall,
    tool_result: toolResult,
    job_event: jobEvent,
    run_started: runStarted,
    run_finished: runFinished,
    run_requeued: runRequeued,
    approval_requested: approvalRequested,
    approval_decided: approvalDecided,
    error: errorEvent,
  };

  function reply(frame) {
    // The server titles a session from its first message (static/js/title.js shows it).
    if (frame.type === "message") root.dispatchEvent(new CustomEvent("agentsite:message-accepted"));
    if (frame.type === "error") notice(frame.message || frame.code);
    if (frame.type === "interrupt") interruptButton.disabled = true;
  }

  // --- controls -----------------------------------------------------------------------------------

  composer.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    send({ type: "message", text });
    input.value = "";
    $("notice").hidden = true;
    input.focus();
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      composer.requestSubmit();
    }
  });
  interruptButton.addEventListener("click", () => {
    interruptButton.disabled = true;
    send({ type: "interrupt" });
  });
  window.addEventListener("pagehide", () => {
    state.leaving = true;
  });
  window.addEventListener("online", () => {
    if (!state.socket) {
      clearTimeout(state.reconnectTimer);
      state.reconnectTimer = null;
      state.attempt = 0;
      connect();
    }
  });
  // Keep-alive that also asks the server to re-check the log.
  setInterval(() => {
    if (state.socket && state.socket.readyState === WebSocket.OPEN) send({ type: "ping" });
  }, 25000);

  // The page starts empty, so it replays the whole log; the stored position
  // only marks where this browser's last visit ended.
  const previous = storedPosition();
  if (previous && previous.seq) root.dataset.lastVisitSeq = previous.seq;
  window.agentsiteChat = {
    state,
    drop: dropSocket,
  };
  connect();
})();
