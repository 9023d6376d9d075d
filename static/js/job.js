// The job page: follow an unfinished job through the REST API, reload once it ends.
(function () {
  "use strict";

  const root = document.getElementById("job");
  const TERMINAL = new Set(["done", "failed", "cancelled", "timed_out"]);
  // The bar's width comes with the page as data: the Content-Security-Policy allows no
  // inline style attribute (setting it from a script is allowed).
  const bar = document.getElementById("job-bar");
  if (bar) bar.style.width = (Number(bar.dataset.percent) || 0) + "%";
  if (!root || TERMINAL.has(root.dataset.status)) return;

  async function poll() {
    try {
      const response = await fetch("/api/jobs/" + encodeURIComponent(root.dataset.job), { credentials: "same-origin" });
      if (response.ok) {
        const job = await response.json();
        const status = document.getElementById("job-status");
        status.textContent = job.status;
        status.className = "status status-" + job.status;
        const fraction = job.progress && typeof job.progress.fraction === "number" ? job.progress.fraction : null;
        if (fraction !== null) {
          document.getElementById("job-bar").style.width = (fraction * 100).toFixed(1) + "%";
          document.getElementById("job-bar").parentElement.classList.remove("indeterminate");
        }
        document.getElementById("job-message").textContent = (job.progress && job.progress.message) || "";
        if (TERMINAL.has(job.status)) {
          location.reload();
          return;
        }
      }
    } catch (err) {
      /* try again */
    }
    setTimeout(poll, 1000);
  }
  setTimeout(poll, 1000);
})();
