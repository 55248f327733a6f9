// The maitre console's only script: a live countdown on <time data-expires="UNIX SECONDS">.
// Pages work without it (the absolute expiry is in the element); with it, the element reads
// "expires in 4 min 12 s" (the absolute time moves to its title) and turns "expired" at zero.
"use strict";

(function () {
  function left(seconds) {
    if (seconds >= 3600) {
      var hours = Math.floor(seconds / 3600);
      return hours + " h " + Math.floor((seconds % 3600) / 60) + " min";
    }
    if (seconds >= 60) {
      return Math.floor(seconds / 60) + " min " + (seconds % 60) + " s";
    }
    return seconds + " s";
  }

  function tick(clocks) {
    var now = Date.now() / 1000;
    var running = false;
    clocks.forEach(function (clock) {
      var remaining = clock.until - now;
      if (remaining > 0) {
        // rounded up: "expired" only once the server, too, refuses a decision
        clock.node.textContent = "expires in " + left(Math.ceil(remaining));
        running = true;
      } else if (!clock.node.classList.contains("expired")) {
        clock.node.textContent = "expired";
        clock.node.classList.add("expired");
      }
    });
    return running;
  }

  function start() {
    var clocks = [];
    document.querySelectorAll("time[data-expires]").forEach(function (node) {
      var until = parseFloat(node.getAttribute("data-expires"));
      if (!isFinite(until)) {
        return;
      }
      node.title = node.textContent;
      clocks.push({ node: node, until: until });
    });
    if (clocks.length === 0 || !tick(clocks)) {
      return;
    }
    var timer = setInterval(function () {
      if (!tick(clocks)) {
        clearInterval(timer);
      }
    }, 1000);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
