// Checks that karmadactl interpret's result documents are what Karmada prints: each document's
// value, decoded and re-encoded the way Karmada's interpret command encodes results (encoding/json
// round trip, then gopkg.in/yaml.v3), must give back the same text. Not part of the product: run by
// cmd/karmadactl/tests/interpret_thirdparty.rs.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

func main() {
	differ, total := 0, 0
	for _, path := range os.Args[1:] {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		for _, doc := range strings.Split(string(data), "---\n") {
			if doc == "" {
				continue
			}
			total++
			header, body, _ := strings.Cut(doc, "\n")
			var value interface{}
			if err := yaml.Unmarshal([]byte(body), &value); err != nil {
				differ++
				fmt.Printf("%s %s: not YAML: %v\n", path, header, err)
				continue
			}
			raw, err := json.Marshal(value)
			if err != nil {
				differ++
				fmt.Printf("%s %s: not JSON: %v\n", path, header, err)
				continue
			}
			var converted interface{}
			if err := json.Unmarshal(raw, &converted); err != nil {
				differ++
				fmt.Printf("%s %s: %v\n", path, header, err)
				continue
			}
			var out bytes.Buffer
			enc := yaml.NewEncoder(&out)
			if err := enc.Encode(converted); err != nil {
				differ++
				fmt.Printf("%s %s: %v\n", path, header, err)
				continue
			}
			enc.Close()
			if out.String() != body {
				differ++
				fmt.Printf("=== %s %s\n--- karmadactl\n%s--- yaml.v3\n%s", path, header, body, out.String())
			}
		}
	}
	fmt.Printf("%d of %d documents differ from yaml.v3\n", differ, total)
	if differ > 0 {
		os.Exit(1)
	}
}
