# readme_block N: print the README's N-th ```bash block (0 = the first, -1 = the last), verbatim.
# .ci/run executes the README's commands through it, so CI runs exactly what a newcomer types.
readme_block() {
  python3 - "$1" <<'PY'
import re, sys
text = open("README.md", encoding="utf-8").read()
print(re.findall(r"```bash\n(.*?)```", text, flags=re.S)[int(sys.argv[1])], end="")
PY
}
