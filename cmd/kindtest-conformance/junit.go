package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// The JUnit report that ginkgo's --junit-report writes (ginkgo
// v2/reporters.JUnitTestSuites), reduced to what the summary counts.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name  string      `xml:"name,attr"`
	Cases []junitCase `xml:"testcase"`
}

type junitCase struct {
	// Name is "[It] <full text> [labels]" for a spec, "[BeforeSuite]",
	// "[SynchronizedAfterSuite]" and the like for the suite's setup nodes.
	Name   string `xml:"name,attr"`
	Status string `xml:"status,attr"`
	// Time is in seconds.
	Time    float64       `xml:"time,attr"`
	Skipped *junitMessage `xml:"skipped"`
	Failure *junitMessage `xml:"failure"`
	Error   *junitMessage `xml:"error"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
}

// summary is what one ginkgo run, or several added up, did.
type summary struct {
	// Listed is how many conformance specs of conformance.yaml the focus
	// and skip select; Selected should come to as many.
	Listed int
	// Selected is how many specs the label filter, focus and skip chose.
	Selected int
	// Ran is Passed plus Failed: specs that ran to an outcome.
	Ran, Passed, Failed int
	// Skipped are selected specs that skipped themselves at run time
	// (e2eskipper: a missing feature, provider or node count), with why.
	Skipped int
	// Failures names each failed spec, or setup node, with its message's
	// first line.
	Failures []string
	// Skips names each spec skipped at run time, with its reason.
	Skips []string
	// Wall is the wall time of the runs.
	Wall time.Duration
}

// add adds another run's counts.
func (s *summary) add(o summary) {
	s.Selected += o.Selected
	s.Ran += o.Ran
	s.Passed += o.Passed
	s.Failed += o.Failed
	s.Skipped += o.Skipped
	s.Failures = append(s.Failures, o.Failures...)
	s.Skips = append(s.Skips, o.Skips...)
	s.Wall += o.Wall
}

// readJUnit summarises the JUnit report at path.
func readJUnit(path string) (summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return summary{}, err
	}
	defer f.Close()
	s, err := parseJUnit(f)
	if err != nil {
		return summary{}, fmt.Errorf("JUnit report %s: %w", path, err)
	}
	return s, nil
}

// parseJUnit summarises a ginkgo JUnit report. A report holds every spec
// of the suite: those the filters left out are "skipped" with the bare
// message "skipped" and are not counted; one that called Skip at run time
// has "skipped - REASON". Setup nodes (BeforeSuite and the like) count
// only when they fail, as failures: a failed BeforeSuite fails the run.
func parseJUnit(r io.Reader) (summary, error) {
	var suites junitSuites
	if err := xml.NewDecoder(r).Decode(&suites); err != nil {
		return summary{}, err
	}
	if len(suites.Suites) == 0 {
		return summary{}, fmt.Errorf("no test suite in the report")
	}
	var s summary
	for _, suite := range suites.Suites {
		for _, tc := range suite.Cases {
			spec := strings.HasPrefix(tc.Name, "[It] ")
			switch tc.Status {
			case "passed":
				if spec {
					s.Selected++
					s.Ran++
					s.Passed++
				}
			case "skipped", "pending":
				if !spec {
					continue
				}
				if tc.Skipped != nil && strings.HasPrefix(tc.Skipped.Message, "skipped - ") {
					s.Selected++
					s.Skipped++
					s.Skips = append(s.Skips, specName(tc.Name)+": "+firstLine(strings.TrimPrefix(tc.Skipped.Message, "skipped - ")))
				}
			default: // failed, timedout, interrupted, aborted, panicked
				msg := tc.Status
				for _, m := range []*junitMessage{tc.Failure, tc.Error} {
					if m != nil && m.Message != "" {
						msg = tc.Status + ": " + firstLine(m.Message)
						break
					}
				}
				if spec {
					s.Selected++
					s.Ran++
				}
				s.Failed++
				s.Failures = append(s.Failures, specName(tc.Name)+": "+msg)
			}
		}
	}
	return s, nil
}

// specName drops the "[It] " a JUnit test case name starts with.
func specName(name string) string { return strings.TrimPrefix(name, "[It] ") }

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	const limit = 300
	if len(s) > limit {
		s = s[:limit] + "..."
	}
	return s
}

// write prints the summary: the counts on one line, then every failure
// and every run-time skip.
func (s summary) write(w io.Writer, title string) {
	fmt.Fprintf(w, "%s: %d selected, %d ran, %d passed, %d failed, %d skipped at run time, wall time %s\n",
		title, s.Selected, s.Ran, s.Passed, s.Failed, s.Skipped, s.Wall.Round(time.Second))
	for _, f := range s.Failures {
		fmt.Fprintf(w, "  FAILED  %s\n", f)
	}
	for _, sk := range s.Skips {
		fmt.Fprintf(w, "  SKIPPED %s\n", sk)
	}
}
