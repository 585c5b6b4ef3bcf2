// The web UI's entry point: mounts the view for the location's hash.
document.getElementById("app").textContent = "Scratchpad";
