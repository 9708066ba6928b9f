package main

import (
	"strings"
	"testing"
)

// A report shaped as ginkgo v2.32's --junit-report writes it: every spec
// of the suite, the filtered-out ones "skipped" with the bare message.
const junitReport = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="7" disabled="3" errors="0" failures="2" time="95.2">
  <testsuite name="Kubernetes e2e suite" package="/tmp" tests="7" disabled="0" skipped="3" errors="0" failures="2" time="95.2" timestamp="2026-12-02T17:30:00">
    <properties><property name="SuiteSucceeded" value="false"></property></properties>
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="1.5"></testcase>
    <testcase name="[It] [sig-network] Services should serve a basic endpoint from pods [Conformance] [sig-network, Conformance]" classname="Kubernetes e2e suite" status="passed" time="12.1"></testcase>
    <testcase name="[It] [sig-network] Services should be able to create a functioning NodePort service [Conformance] [sig-network, Conformance]" classname="Kubernetes e2e suite" status="failed" time="30.2">
      <failure message="failed to reach NodePort&#xA;more detail" type="failed">stack</failure>
    </testcase>
    <testcase name="[It] [sig-node] Pods should be updated [Conformance]" classname="Kubernetes e2e suite" status="skipped" time="0.1"><skipped message="skipped - Requires at least 2 nodes (not 1)"></skipped></testcase>
    <testcase name="[It] [sig-apps] Deployment should not run [Slow]" classname="Kubernetes e2e suite" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
    <testcase name="[It] [sig-node] Pods should be pending" classname="Kubernetes e2e suite" status="pending" time="0"><skipped message="pending"></skipped></testcase>
    <testcase name="[It] [sig-node] Pods should panic [Conformance]" classname="Kubernetes e2e suite" status="panicked" time="1"><error message="boom" type="panicked">trace</error></testcase>
    <testcase name="[SynchronizedAfterSuite]" classname="Kubernetes e2e suite" status="failed" time="2"><failure message="cleanup failed" type="failed"></failure></testcase>
  </testsuite>
</testsuites>`

func TestParseJUnit(t *testing.T) {
	s, err := parseJUnit(strings.NewReader(junitReport))
	if err != nil {
		t.Fatal(err)
	}
	if s.Selected != 4 || s.Ran != 3 || s.Passed != 1 || s.Failed != 3 || s.Skipped != 1 {
		t.Fatalf("summary %+v: want 4 selected, 3 ran, 1 passed, 3 failed (two specs and the after-suite node), 1 skipped", s)
	}
	wantFailures := []string{
		"[sig-network] Services should be able to create a functioning NodePort service [Conformance] [sig-network, Conformance]: failed: failed to reach NodePort",
		"[sig-node] Pods should panic [Conformance]: panicked: boom",
		"[SynchronizedAfterSuite]: failed: cleanup failed",
	}
	if strings.Join(s.Failures, "\n") != strings.Join(wantFailures, "\n") {
		t.Fatalf("failures:\n%s\nwant:\n%s", strings.Join(s.Failures, "\n"), strings.Join(wantFailures, "\n"))
	}
	if len(s.Skips) != 1 || s.Skips[0] != "[sig-node] Pods should be updated [Conformance]: Requires at least 2 nodes (not 1)" {
		t.Fatalf("skips %q", s.Skips)
	}
}

func TestParseJUnitRefusesAnEmptyReport(t *testing.T) {
	if _, err := parseJUnit(strings.NewReader(`<testsuites></testsuites>`)); err == nil {
		t.Fatal("a report with no suite gave no error")
	}
	if _, err := parseJUnit(strings.NewReader(`not xml`)); err == nil {
		t.Fatal("garbage gave no error")
	}
}

func TestSummaryAddAndWrite(t *testing.T) {
	a := summary{Selected: 3, Ran: 3, Passed: 2, Failed: 1, Failures: []string{"x: failed"}}
	a.add(summary{Selected: 2, Ran: 1, Passed: 1, Skipped: 1, Skips: []string{"y: why"}})
	var b strings.Builder
	a.write(&b, "total")
	want := "total: 5 selected, 4 ran, 3 passed, 1 failed, 1 skipped at run time, wall time 0s\n  FAILED  x: failed\n  SKIPPED y: why\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
