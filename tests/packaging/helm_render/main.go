// Renders a Helm chart with Go's text/template, the engine Helm itself uses,
// for machines where Helm cannot be installed: the chart's templates, its
// values (given as JSON: values.yaml merged with overrides by the caller),
// .Release and .Chart, and the template functions the chart uses (Helm's
// names and meanings). Prints the manifests as `helm template` does, each
// after "---" and a "# Source:" line.
//
//	go run main.go CHART_DIR VALUES_JSON RELEASE NAMESPACE CHART_JSON
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/template"
)

func yamlScalar(v interface{}) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case string:
		plain := x != "" && !strings.ContainsAny(x, ":#{}[],&*!|>'\"%@`\n") &&
			strings.TrimSpace(x) == x
		if _, err := strconv.ParseFloat(x, 64); err == nil {
			plain = false
		}
		switch strings.ToLower(x) {
		case "true", "false", "yes", "no", "null", "on", "off", "~":
			plain = false
		}
		if plain {
			return x
		}
		b, _ := json.Marshal(x)
		return string(b)
	}
	return fmt.Sprint(v)
}

// toYaml: block style, keys sorted, as Helm's (sigs.k8s.io/yaml) does.
func toYaml(v interface{}) string {
	var b strings.Builder
	emit(&b, v, 0)
	return strings.TrimSuffix(b.String(), "\n")
}

func emit(b *strings.Builder, v interface{}, ind int) {
	pad := strings.Repeat(" ", ind)
	switch x := v.(type) {
	case map[string]interface{}:
		if len(x) == 0 {
			b.WriteString(pad + "{}\n")
			return
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch c := x[k].(type) {
			case map[string]interface{}:
				if len(c) == 0 {
					b.WriteString(pad + yamlScalar(k) + ": {}\n")
					continue
				}
				b.WriteString(pad + yamlScalar(k) + ":\n")
				emit(b, c, ind+2)
			case []interface{}:
				if len(c) == 0 {
					b.WriteString(pad + yamlScalar(k) + ": []\n")
					continue
				}
				b.WriteString(pad + yamlScalar(k) + ":\n")
				emit(b, c, ind)
			default:
				b.WriteString(pad + yamlScalar(k) + ": " + yamlScalar(c) + "\n")
			}
		}
	case []interface{}:
		if len(x) == 0 {
			b.WriteString(pad + "[]\n")
			return
		}
		for _, item := range x {
			var sub strings.Builder
			emit(&sub, item, ind+2)
			s := sub.String()
			if _, scalar := item.(map[string]interface{}); !scalar {
				if _, list := item.([]interface{}); !list {
					b.WriteString(pad + "- " + yamlScalar(item) + "\n")
					continue
				}
			}
			b.WriteString(pad + "- " + strings.TrimPrefix(s, pad+"  "))
		}
	default:
		b.WriteString(pad + yamlScalar(x) + "\n")
	}
}

func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: helm_render CHART_DIR VALUES_JSON RELEASE NAMESPACE CHART_JSON")
		os.Exit(2)
	}
	dir := os.Args[1]
	var values, chart map[string]interface{}
	if err := json.Unmarshal([]byte(os.Args[2]), &values); err != nil {
		fmt.Fprintln(os.Stderr, "values:", err)
		os.Exit(2)
	}
	if err := json.Unmarshal([]byte(os.Args[5]), &chart); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(2)
	}
	root := template.New("chart")
	funcs := template.FuncMap{
		"toYaml":  toYaml,
		"indent":  indent,
		"nindent": func(n int, s string) string { return "\n" + indent(n, s) },
		"quote":   func(v interface{}) string { return strconv.Quote(fmt.Sprint(v)) },
		"b64enc":  func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suf, s string) string { return strings.TrimSuffix(s, suf) },
		"fail":       func(msg string) (string, error) { return "", errors.New(msg) },
		"include": func(name string, data interface{}) (string, error) {
			var buf bytes.Buffer
			err := root.ExecuteTemplate(&buf, name, data)
			return buf.String(), err
		},
	}
	root.Funcs(funcs).Option("missingkey=zero")
	files, _ := filepath.Glob(filepath.Join(dir, "templates", "*"))
	sort.Strings(files)
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if _, err := root.New(filepath.Base(f)).Parse(string(text)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	data := map[string]interface{}{
		"Values":  values,
		"Chart":   chart,
		"Release": map[string]interface{}{"Name": os.Args[3], "Namespace": os.Args[4], "Service": "Helm"},
	}
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasPrefix(name, "_") || !strings.HasSuffix(name, ".yaml") {
			continue
		}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		out := strings.TrimSpace(buf.String())
		if out == "" {
			continue
		}
		fmt.Printf("---\n# Source: %s/templates/%s\n%s\n", chart["Name"], name, out)
	}
}
