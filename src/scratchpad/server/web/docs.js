// The API docs page (/docs): Swagger UI from the server's own files, reading /openapi.json.
// A module runs after the deferred bundle that defines SwaggerUIBundle, and never inline, so
// the page works offline and under a Content-Security-Policy of script-src 'self'.

const root = document.getElementById("swagger-ui");

if (typeof window.SwaggerUIBundle !== "function") {
  root.textContent = "The API docs could not load Swagger UI (/static/vendor/swagger-ui/).";
} else {
  window.SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null, // never send the document to a validator elsewhere
    // The page's own credentials (its session, or the key a client adds) go with every
    // request, "Try it out" included; requests stay on this origin.
    requestInterceptor: (request) => {
      request.credentials = "same-origin";
      return request;
    },
  });
}
