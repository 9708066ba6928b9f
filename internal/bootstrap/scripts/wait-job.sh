#!/bin/bash
# Waits for a Job to be Complete, or Failed, whichever comes first; a
# failed Job exits 3. Bash for wait -n -p.
#
# Usage: wait-job.sh KUBECONFIG OBJECT NAMESPACE TIMEOUT
export KUBECONFIG="$1"
object=$2 namespace=$3 timeout=$4
kubectl wait --for=condition=Complete "$object" -n "$namespace" --timeout="$timeout" & ok=$!
kubectl wait --for=condition=Failed "$object" -n "$namespace" --timeout="$timeout" >/dev/null 2>&1 & bad=$!
wait -n -p first $ok $bad; rc=$?
kill $ok $bad 2>/dev/null
if [ "$first" = "$bad" ] && [ $rc -eq 0 ]; then echo "error: $object failed" >&2; exit 3; fi
exit $rc
