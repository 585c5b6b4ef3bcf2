// The API docs page (/docs): Swagger UI from the server's own files, reading /openapi.json.
// A module runs after the deferred bundle that defines SwaggerUIBundle, and never inline, so
// the page works offline and under a Content-Security-Policy of script-src 'self'.

import { withCode } from "./dom.js";
import { HEADER, HOW_TO_LOG_IN, token } from "./session.js";

const root = document.getElementById("swagger-ui");
const session = await token(); // this tab's, or a logged-in tab's (session.js)

if (typeof window.SwaggerUIBundle !== "function") {
  root.textContent = "The API docs could not load Swagger UI (/static/vendor/swagger-ui/).";
} else if (!session) {
  root.replaceChildren(...withCode(`The API docs need a browser session. ${HOW_TO_LOG_IN}`));
} else {
  window.SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null, // never send the document to a validator elsewhere
    // The tab's session goes with every request to this origin, "Try it out" included (the
    // key, once given to "Authorize", goes too and wins); never to another origin.
    requestInterceptor: (request) => {
      request.credentials = "omit";
      if (new URL(request.url, location.href).origin === location.origin) request.headers[HEADER] = session;
      return request;
    },
  });
}
