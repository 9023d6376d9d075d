// The chat page's title: rename it in place (PATCH /api/sessions/<id>), and show the
// title the server gives an untitled session from its first message.
(function () {
  "use strict";

  const root = document.getElementById("chat");
  const sessionId = root.dataset.session;
  const url = "/api/sessions/" + encodeURIComponent(sessionId);
  const box = document.getElementById("session-title");
  const heading = document.getElementById("title-text");
  const renameButton = document.getElementById("rename");
  const form = document.getElementById("rename-form");
  const input = document.getElementById("title-input");
  const error = document.getElementById("rename-error");
  const csrf = form.querySelector("[name=csrfmiddlewaretoken]").value;

  function show(title) {
    box.dataset.title = title;
    heading.textContent = title || "Untitled session";
    document.title = (title || "Session") + " · agentsite";
  }

  function editing(on) {
    form.hidden = !on;
    heading.hidden = on;
    renameButton.hidden = on;
    error.textContent = "";
    if (on) {
      input.value = box.dataset.title;
      input.focus();
      input.select();
    } else {
      renameButton.focus();
    }
  }

  async function save() {
    error.textContent = "";
    let response;
    try {
      response = await fetch(url, {
        method: "PATCH",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
        body: JSON.stringify({ title: input.value }),
      });
    } catch (e) {
      error.textContent = "The title could not be saved: the server is unreachable.";
      return;
    }
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      error.textContent = (body.error && body.error.message) || "The title could not be saved.";
      input.focus();
      return;
    }
    show(body.title);
    editing(false);
  }

  renameButton.addEventListener("click", () => editing(true));
  document.getElementById("rename-cancel").addEventListener("click", () => editing(false));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    save();
  });
  form.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      e.preventDefault();
      editing(false);
    }
  });

  root.addEventListener("agentsite:message-accepted", async () => {
    if (box.dataset.title) return;
    const response = await fetch(url, { credentials: "same-origin" });
    if (!response.ok) return;
    const session = await response.json();
    if (session.title) show(session.title);
  });
})();
