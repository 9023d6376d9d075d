// Requests for the user's answer, as cards: a tool call to approve, edit or reject,
// or a question to answer or decline. The chat (static/js/chat.js) and the page of
// pending requests (static/js/approvals_page.js) render them alike.
//
// A card is drawn from the request's document (the payload of approval_requested and
// approval_decided, or the REST API's answer) and redrawn in place from any later
// document of the same request, wherever the decision was made. Decisions go to
// POST /api/approvals/<id>/decision with the page's login cookie and CSRF token; a
// refusal (409 already decided or expired, 422) stays on the card as a sentence.
(function () {
  "use strict";

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function button(className, text) {
    const node = el("button", className, text);
    node.type = "button";
    return node;
  }

  function pretty(value) {
    return JSON.stringify(value, null, 2);
  }

  function csrfToken() {
    const input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  // One key per card and decision: the same decision sent again after a lost answer is
  // answered with the request as it stands, not refused as already decided.
  function idempotencyKey(card, decision) {
    if (!card.dataset.key) card.dataset.key = Date.now().toString(36) + Math.random().toString(36).slice(2);
    return card.dataset.key + "-" + decision;
  }

  // --- drawing ------------------------------------------------------------------------------

  function render(doc, options) {
    const opts = options || {};
    const card = el("li", "approval-card");
    card.dataset.approval = doc.id;
    card.dataset.kind = doc.kind;
    const head = el("div", "approval-head");
    head.appendChild(el("span", "approval-label", doc.kind === "question" ? "Question" : "Approval needed"));
    if (doc.kind !== "question") head.appendChild(el("code", "approval-tool", doc.tool));
    head.appendChild(el("span", "status approval-status"));
    if (opts.session) {
      const link = el("a", "approval-session", opts.session.title || "Untitled session");
      link.href = "/sessions/" + encodeURIComponent(doc.session_id) + "/";
      head.appendChild(el("span", "muted", "in"));
      head.appendChild(link);
    }
    card.appendChild(head);
    if (doc.kind === "question") card.appendChild(el("p", "approval-question", doc.question));
    else card.appendChild(el("pre", "approval-args", pretty(doc.arguments || {})));
    const expiry = el("p", "approval-expiry muted", "Expires ");
    const time = el("time", "", new Date(doc.expires_at).toLocaleString());
    time.dateTime = doc.expires_at;
    expiry.appendChild(time);
    card.appendChild(expiry);
    if (doc.status === "pending") card.appendChild(doc.kind === "question" ? answerForm(card, doc) : approvalForm(card, doc));
    card.appendChild(el("p", "approval-outcome"));
    const error = el("p", "approval-error error");
    error.setAttribute("role", "alert");
    card.appendChild(error);
    update(card, doc);
    return card;
  }

  // Redraw the card's state from ``doc``: a decided request loses its controls.
  function update(card, doc) {
    card.dataset.status = doc.status;
    const status = card.querySelector(".approval-status");
    status.textContent = doc.status === "pending" ? "waiting for you" : doc.status;
    status.className = "status approval-status status-" + doc.status;
    if (doc.status === "pending") return;
    const controls = card.querySelector(".approval-form");
    if (controls) controls.remove();
    card.querySelector(".approval-expiry").hidden = true;
    card.querySelector(".approval-outcome").textContent = outcome(doc);
    if (doc.status === "edited" && doc.edited_arguments && !card.querySelector(".approval-edited")) {
      const edited = el("pre", "approval-edited", pretty(doc.edited_arguments));
      card.insertBefore(edited, card.querySelector(".approval-outcome"));
    }
  }

  function outcome(doc) {
    const who = doc.decided_by || "someone";
    const reason = doc.reason ? ": " + doc.reason : "";
    if (doc.status === "edited") return "Approved by " + who + " with edited arguments";
    if (doc.status === "answered") return "Answered by " + who + ": " + answerText(doc.answer);
    if (doc.status === "approved") return "Approved by " + who;
    if (doc.status === "rejected") return (doc.kind === "question" ? "Declined by " : "Rejected by ") + who + reason;
    if (doc.status === "expired") return "Expired: nobody decided in time.";
    return "Cancelled" + reason;
  }

  function answerText(answer) {
    return typeof answer === "string" ? answer : JSON.stringify(answer);
  }

  function showError(card, text) {
    card.querySelector(".approval-error").textContent = text;
  }

  // --- a tool call: approve, edit or reject -------------------------------------------------------

  function approvalForm(card, doc) {
    const form = el("div", "approval-form");
    const actions = el("div", "approval-actions");
    const approve = button("approve", "Approve");
    const edit = button("secondary edit", "Edit");
    const reason = el("input", "reason");
    reason.type = "text";
    reason.maxLength = 2000;
    reason.placeholder = "Reason (optional)";
    reason.setAttribute("aria-label", "Reason for rejecting");
    const reject = button("secondary reject", "Reject");
    actions.append(approve, edit, reason, reject);
    const allowLabel = el("label", "allow");
    const allow = el("input", "allow-session");
    allow.type = "checkbox";
    allowLabel.append(allow, document.createTextNode(" Allow " + doc.tool + " for the rest of this session"));

    const editor = el("div", "approval-editor");
    editor.hidden = true;
    const argsLabel = el("label", "", "Arguments (JSON)");
    const args = el("textarea", "edit-args");
    args.rows = Math.min(12, pretty(doc.arguments || {}).split("\n").length + 1);
    args.value = pretty(doc.arguments || {});
    argsLabel.appendChild(args);
    const save = button("save-edit", "Run with these arguments");
    const cancel = button("secondary cancel-edit", "Cancel");
    editor.append(argsLabel, save, cancel);

    form.append(actions, allowLabel, editor);
    approve.addEventListener("click", () => decide(card, { decision: "approve", allow_for_session: allow.checked }));
    reject.addEventListener("click", () => decide(card, { decision: "reject", reason: reason.value }));
    edit.addEventListener("click", () => {
      editor.hidden = false;
      actions.hidden = true;
      args.focus();
    });
    cancel.addEventListener("click", () => {
      editor.hidden = true;
      actions.hidden = false;
      showError(card, "");
    });
    save.addEventListener("click", () => {
      let parsed;
      try {
        parsed = JSON.parse(args.value);
      } catch (err) {
        showError(card, "The arguments are not valid JSON: " + err.message);
        return;
      }
      if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
        showError(card, "The arguments must be a JSON object.");
        return;
      }
      decide(card, { decision: "edit", arguments: parsed, allow_for_session: allow.checked });
    });
    return form;
  }

  // --- a question: a small form from its answer's schema -----------------------------------------

  // The control for the answer, and how to read its value (``{error}`` when it is not one).
  function answerControl(schema) {
    const type = schema.type;
    if (Array.isArray(schema.enum) && schema.enum.length) {
      const select = el("select", "answer-input");
      schema.enum.forEach((value, i) => {
        const option = el("option", "", typeof value === "string" ? value : JSON.stringify(value));
        option.value = String(i);
        select.appendChild(option);
      });
      return { input: select, read: () => ({ value: schema.enum[Number(select.value)] }) };
    }
    if (type === "string") {
      const input = el("input", "answer-input");
      input.type = "text";
      if (schema.maxLength) input.maxLength = schema.maxLength;
      return { input, read: () => ({ value: input.value }) };
    }
    if (type === "number" || type === "integer") {
      const input = el("input", "answer-input");
      input.type = "number";
      input.step = type === "integer" ? "1" : "any";
      if (typeof schema.minimum === "number") input.min = String(schema.minimum);
      if (typeof schema.maximum === "number") input.max = String(schema.maximum);
      return {
        input,
        read: () => (input.value.trim() === "" || Number.isNaN(input.valueAsNumber) ? { error: "Enter a number." } : { value: input.valueAsNumber }),
      };
    }
    if (type === "boolean") {
      const input = el("input", "answer-input");
      input.type = "checkbox";
      return { input, read: () => ({ value: input.checked }) };
    }
    const input = el("textarea", "answer-input answer-json");
    input.rows = 4;
    input.placeholder = "Your answer as JSON";
    return {
      input,
      read: () => {
        try {
          return { value: JSON.parse(input.value) };
        } catch (err) {
          return { error: "The answer is not valid JSON: " + err.message };
        }
      },
    };
  }

  function answerForm(card, doc) {
    const schema = doc.answer_schema || { type: "string" };
    const form = el("form", "approval-form answer-form");
    form.noValidate = true;
    const control = answerControl(schema);
    const label = el("label", "answer-label", schema.title || schema.description || "Your answer");
    if (control.input.type === "checkbox") label.prepend(control.input);
    else label.appendChild(control.input);
    const actions = el("div", "approval-actions");
    const submit = el("button", "answer", "Answer");
    submit.type = "submit";
    const decline = button("secondary decline", "Decline");
    actions.append(submit, decline);
    form.append(label, actions);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const read = control.read();
      if (read.error) {
        showError(card, read.error);
        return;
      }
      decide(card, { decision: "answer", answer: read.value });
    });
    decline.addEventListener("click", () => decide(card, { decision: "reject" }));
    return form;
  }

  // --- deciding -----------------------------------------------------------------------------------

  function busy(card, on) {
    card.classList.toggle("busy", on);
    card.querySelectorAll(".approval-form button").forEach((b) => (b.disabled = on));
  }

  async function decide(card, body) {
    const id = card.dataset.approval;
    showError(card, "");
    busy(card, true);
    let response;
    try {
      response = await fetch("/api/approvals/" + encodeURIComponent(id) + "/decision", {
        method: "POST",
        credentials: "same-origin",
        headers: {
          "Content-Type": "application/json",
          "X-CSRFToken": csrfToken(),
          "Idempotency-Key": idempotencyKey(card, body.decision),
        },
        body: JSON.stringify(body),
      });
    } catch (err) {
      busy(card, false);
      showError(card, "The decision could not be sent: the server is unreachable. Try again.");
      return;
    }
    const reply = await response.json().catch(() => ({}));
    busy(card, false);
    if (response.ok) {
      update(card, reply);
      card.dispatchEvent(new CustomEvent("agentsite:approval-decided", { bubbles: true, detail: reply }));
      return;
    }
    const error = reply.error || {};
    // 409: decided elsewhere, or expired; the request as it now stands comes with it.
    if (error.details && error.details.id === id) update(card, error.details);
    showError(card, error.message || "The decision was refused (HTTP " + response.status + ").");
  }

  window.agentsiteApprovals = { render, update };
})();
