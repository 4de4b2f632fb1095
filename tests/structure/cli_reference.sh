#!/usr/bin/env bash
# docs/cli.md against the CLI itself: everything below the marker line is
# every command's --help exactly as `hetbench` prints it, subcommands found by
# walking the help's "Subcommands:" lists. Fails with the diff when they differ.
#   cli_reference.sh HETBENCH DOCS_CLI_MD           check
#   cli_reference.sh HETBENCH DOCS_CLI_MD --write   rewrite the generated part
set -euo pipefail
bin=$1 doc=$2 mode=${3:-check}
marker='<!-- Generated below by tests/structure/cli_reference.sh --write from the CLI'"'"'s own --help; do not edit by hand. -->'

subcommands() {  # the names listed under "Subcommands:" in a help text
  awk '/^Subcommands:/{on=1; next} on && /^  [a-z]/{print $1; next} on && NF==0{on=0}'
}

help() {  # a command's --help, with the program named as users call it (not by its build path),
          # without the caller's HETBENCH_* settings (they change the defaults shown)
  env -u HETBENCH_SERVER -u HETBENCH_TLS_CA -u HETBENCH_TOKEN_FILE "$bin" "$@" --help | sed "s#${bin}#hetbench#g"
}

generate() {
  local path
  emit() {  # $@: the command path (may be empty)
    local title="hetbench${*:+ $*}"
    printf '\n## `%s`\n\n```text\n' "$title"
    help "$@"
    printf '```\n'
    local sub
    for sub in $(help "$@" | subcommands); do emit "$@" "$sub"; done
  }
  emit
}

[[ -x $bin ]] || { echo "cli_reference: $bin is not an executable"; exit 2; }
head_part=$(awk -v m="$marker" '$0==m{exit} {print}' "$doc")
if [[ $mode == --write ]]; then
  { printf '%s\n%s\n' "$head_part" "$marker"; generate; } >"$doc.tmp"
  mv "$doc.tmp" "$doc"
  echo "cli_reference: wrote $doc"
  exit 0
fi
grep -qxF "$marker" "$doc" || { echo "cli_reference: $doc lacks the marker line; run with --write"; exit 1; }
expected=$(mktemp)
trap 'rm -f "$expected"' EXIT
{ printf '%s\n%s\n' "$head_part" "$marker"; generate; } >"$expected"
if ! diff -u "$doc" "$expected"; then
  echo "cli_reference: docs/cli.md differs from the CLI's --help (above, + is what the CLI prints);"
  echo "  update it: tests/structure/cli_reference.sh build/client/hetbench docs/cli.md --write"
  exit 1
fi
echo "cli_reference: ok: $(grep -c '^## `hetbench' "$doc") commands match their --help"
