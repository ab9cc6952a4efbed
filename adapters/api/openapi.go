package api

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the API's OpenAPI 3 document, served at /api/openapi.json.
// It is written by hand; openapi_test.go keeps it equal to routes (paths,
// methods, request and response bodies) and to the Go types' JSON fields.
//
//go:embed openapi.json
var openAPIDoc []byte

// openAPI answers GET /api/openapi.json.
func (a *API) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDoc) // the client is gone when it fails
}
