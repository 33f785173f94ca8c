package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// runYAML2JSON reads a stream of YAML documents on stdin and prints them as one JSON array, so
// the script (Python's standard library only) can read the upstream manifests.
func runYAML2JSON(_ []string) int {
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(os.Stdin), 4096)
	docs := []any{}
	for {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "yaml2json: %v\n", err)
			return 1
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(docs); err != nil {
		fmt.Fprintf(os.Stderr, "yaml2json: %v\n", err)
		return 1
	}
	return 0
}
