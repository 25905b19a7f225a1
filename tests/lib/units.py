"""systemd unit files read the way systemd reads them, for tests that run a
shipped unit's commands without systemd (it is not PID 1 on these
machines): sections and repeated keys, drop-ins, EnvironmentFile= files,
specifiers of an instance (%i, %I, %f) and the expansion of $VAR and
${VAR} in Exec lines. Only what the project's units use is supported; an
unknown specifier or a variable that is not set fails loudly rather than
being guessed.

    u = Unit("/lib/systemd/system/ppl-mount@.service", instance=escape_path(mnt))
    u.get("Service", "ExecStart")       # every value of a key, in order
    u.command("ExecStart", env)          # argv, specifiers and variables expanded
    read_env_file(path)                  # {KEY: VALUE}
    private_env_file(installed, dest, {KEY: VALUE})   # the installed file, values replaced
"""
import glob
import os
import re
import shlex
import subprocess


def escape_path(path):
    """systemd-escape -p PATH: a path as an instance name."""
    r = subprocess.run(["systemd-escape", "-p", path], capture_output=True, text=True, check=True)
    return r.stdout.strip()


def unescape_path(name):
    r = subprocess.run(["systemd-escape", "-u", "-p", name], capture_output=True, text=True, check=True)
    return r.stdout.strip()


def _logical_lines(text):
    """Lines with backslash continuations joined, comments dropped."""
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not cur and (not line.strip() or line.lstrip()[0] in "#;"):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        out.append(cur + line)
        cur = ""
    if cur:
        out.append(cur)
    return out


def parse_unit_text(text, into=None):
    """[(section, key, value)] in order; an empty value resets the key, as
    in systemd."""
    entries = into if into is not None else []
    section = None
    for line in _logical_lines(text):
        s = line.strip()
        if s.startswith("[") and s.endswith("]"):
            section = s[1:-1]
            continue
        key, sep, value = s.partition("=")
        if not sep or section is None:
            raise ValueError(f"not a unit file line: {line!r}")
        key, value = key.strip(), value.strip()
        if value == "":
            entries[:] = [e for e in entries if (e[0], e[1]) != (section, key)]
        else:
            entries.append((section, key, value))
    return entries


class Unit:
    def __init__(self, path, instance=None, dropins=True):
        """The unit file at path, then its drop-ins (NAME.d/*.conf beside
        it, in name order). A template (NAME@.service) needs `instance`."""
        self.path = path
        self.name = os.path.basename(path)
        self.instance = instance
        if "@." in self.name and instance is None:
            raise ValueError(f"{self.name} is a template: give an instance")
        with open(path) as f:
            self.entries = parse_unit_text(f.read())
        self.dropin_paths = sorted(glob.glob(os.path.join(path + ".d", "*.conf"))) if dropins else []
        for d in self.dropin_paths:
            with open(d) as f:
                parse_unit_text(f.read(), self.entries)

    def get(self, section, key):
        return [v for s, k, v in self.entries if s == section and k == key]

    def one(self, section, key):
        values = self.get(section, key)
        if len(values) != 1:
            raise AssertionError(f"{self.name}: [{section}] {key}= has {len(values)} values: {values}")
        return values[0]

    def specifiers(self, text):
        table = {"%%": "%", "%n": self.name}
        if self.instance is not None:
            table.update({"%i": self.instance, "%I": unescape_path(self.instance),
                          "%f": "/" + unescape_path(self.instance).lstrip("/")})

        def sub(m):
            if m.group(0) not in table:
                raise ValueError(f"{self.name}: specifier {m.group(0)} is not supported by tests/lib/units.py")
            return table[m.group(0)]
        return re.sub(r"%.", sub, text)

    def environment(self, env_files):
        """The service's environment: Environment= assignments and the
        EnvironmentFile= files, in order. env_files maps each file named
        by the unit to the file to read instead (a test's private copy);
        every file the unit names must be mapped."""
        env = {}
        for s, k, v in self.entries:
            if s != "Service":
                continue
            if k == "Environment":
                for word in shlex.split(self.specifiers(v)):
                    name, _, value = word.partition("=")
                    env[name] = value
            elif k == "EnvironmentFile":
                optional = v.startswith("-")
                name = self.specifiers(v).lstrip("-")
                if optional and name not in env_files and not os.path.exists(name):
                    continue   # systemd skips a missing "-" file
                if name not in env_files:
                    raise AssertionError(f"{self.name} reads {name}: the test gives no private copy of it")
                env.update(read_env_file(env_files[name]))
        return env

    def command(self, key, env, index=0):
        """Exec line `key` (the index-th, for repeated keys) as argv: its
        prefixes (-, @, :, +, !) dropped, specifiers replaced, then
        ${VAR} replaced within a word and a word that is exactly $VAR split
        on white space, as systemd does."""
        line = self.get("Service", key)[index]
        line = line.lstrip("-@:+!")
        argv = []
        for word in shlex.split(self.specifiers(line)):
            m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
            if m:
                argv.extend(_lookup(env, m.group(1), self.name).split())
                continue
            argv.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda mm: _lookup(env, mm.group(1), self.name),
                               word))
        return argv


def _lookup(env, name, unit):
    if name not in env:
        raise AssertionError(f"{unit}: ${name} is used but not set by its environment")
    return env[name]


def read_env_file(path):
    """An EnvironmentFile= file: KEY=VALUE lines, # and ; comments, values
    optionally in quotes."""
    env = {}
    with open(path) as f:
        for line in _logical_lines(f.read()):
            key, sep, value = line.strip().partition("=")
            if not sep:
                raise ValueError(f"{path}: not an assignment: {line!r}")
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            env[key.strip()] = value
    return env


def private_env_file(installed, dest, values):
    """Writes dest: the installed environment file with the given keys'
    values replaced (each must be in the installed file, so that a key
    renamed there fails the test) and every other line as shipped."""
    with open(installed) as f:
        lines = f.read().splitlines()
    seen = set()
    out = []
    for line in lines:
        key = line.partition("=")[0].strip()
        if "=" in line and not line.lstrip().startswith(("#", ";")) and key in values:
            out.append(f"{key}={values[key]}")
            seen.add(key)
        else:
            out.append(line)
    missing = set(values) - seen
    if missing:
        raise AssertionError(f"{installed} has no {', '.join(sorted(missing))} any more")
    with open(dest, "w") as f:
        f.write("\n".join(out) + "\n")
    return dest
