// Baton's dashboard: refresh a running job's timeline when the server says
// the job moved (server-sent events from /ui/jobs/N/live).
document.addEventListener("DOMContentLoaded", function () {
  var el = document.querySelector("[data-live]");
  if (!el || !window.EventSource) return;
  var es = new EventSource(el.dataset.live);
  var refresh = function () {
    htmx.ajax("GET", el.dataset.refresh, { target: "#timeline", swap: "outerHTML" });
  };
  es.addEventListener("change", refresh);
  es.addEventListener("end", function () { es.close(); refresh(); el.dataset.ended = "true"; });
});
