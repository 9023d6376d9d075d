// The page of pending requests across the user's sessions (/approvals/): the server
// hands their documents over in the page, newest first; each becomes a card with the
// chat's controls, redrawn in place by the answer to its decision.
(function () {
  "use strict";

  const list = document.getElementById("approvals");
  const rows = JSON.parse(document.getElementById("approvals-data").textContent);
  for (const row of rows) {
    list.appendChild(window.agentsiteApprovals.render(row.request, { session: { title: row.session_title } }));
  }
})();
