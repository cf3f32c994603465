#!/usr/bin/env bash
# exports.sh LIB HEADER — libkiln.so exports exactly the functions kiln.h
# declares (nm -D), and its SONAME carries the major version.
set -u
lib=$1 header=$2
fail=0
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u)
declared=$(grep -oE '\bkiln_[a-z0-9_]+[[:space:]]*\(' "$header" | tr -d '( ' | sort -u)
others=$(grep -v '^kiln_' <<<"$exported")
if [ -n "$others" ]; then
  echo "FAIL: libkiln.so exports $(wc -l <<<"$others") symbols that are not kiln_*:"; head -20 <<<"$others"; fail=1
fi
missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
if [ -n "$missing" ]; then echo "FAIL: declared in kiln.h but not exported (declared below the visibility pop?):"; echo "$missing"; fail=1; fi
extra=$(comm -23 <(grep '^kiln_' <<<"$exported") <(echo "$declared"))
if [ -n "$extra" ]; then echo "FAIL: exported but not declared in kiln.h:"; echo "$extra"; fail=1; fi
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
if [[ "$soname" =~ ^libkiln\.so\.[0-9]+$ ]]; then echo "ok   SONAME $soname"; else echo "FAIL: SONAME '$soname'"; fail=1; fi
echo "$(wc -l <<<"$exported") symbols exported, $(wc -l <<<"$declared") declared"
exit $fail
