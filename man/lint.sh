#!/bin/sh
# Fails on any mandoc warning or error (style notes are allowed).
out=$(mandoc -T lint -W warning "$@" 2>&1)
[ -z "$out" ] && exit 0
echo "$out"
exit 1
