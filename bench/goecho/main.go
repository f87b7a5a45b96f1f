// A bare Go AdmissionReview echo over HTTPS: the floor any out-of-process webhook pays.
//
// bench/e2e.py runs it beside nicguard: it decodes the review and allows it, nothing else.
// HTTP/1.1 only, as uvicorn serves, so the apiserver talks to both the same way.
package main

import (
	"crypto/tls"
	"encoding/json"
	"log"
	"net/http"
	"os"
)

type review struct {
	Request struct {
		UID string `json:"uid"`
	} `json:"request"`
}

func validate(w http.ResponseWriter, r *http.Request) {
	var in review
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	out := map[string]any{
		"apiVersion": "admission.k8s.io/v1",
		"kind":       "AdmissionReview",
		"response":   map[string]any{"uid": in.Request.UID, "allowed": true},
	}
	if err := json.NewEncoder(w).Encode(out); err != nil {
		log.Print(err)
	}
}

func main() {
	if len(os.Args) != 4 {
		log.Fatal("usage: goecho ADDRESS CERT KEY")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/validate", validate)
	server := &http.Server{
		Addr:         os.Args[1],
		Handler:      mux,
		TLSConfig:    &tls.Config{MinVersion: tls.VersionTLS12},
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	log.Fatal(server.ListenAndServeTLS(os.Args[2], os.Args[3]))
}
