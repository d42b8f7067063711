//! The presets' command lines, quoting, detection and environment.

use std::path::{Path, PathBuf};
use std::process::Command;

use ralph_signal::StreamFormat;

use super::command::{Options, running_as_root};
use super::preset::Arg::Lit;
use super::*;
use ralph_protocol::shell_quote;

/// A prompt, id, model and arguments that a shell would mangle if any went unquoted.
const NASTY: &str = "it's \"quoted\" $(touch pwned) `touch pwned2` $HOME\n; rm -rf / &\\ *";

/// Runs `command` under `sh -c` with its program replaced by `printf '%s\0'`: the words
/// the program would have received. Fails if the shell expanded anything.
fn words_seen(command: &str, program: &str) -> Vec<String> {
    let rest = command
        .strip_prefix(program)
        .unwrap_or_else(|| panic!("{command:?} does not start with {program:?}"));
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s\\0' {rest}"))
        .current_dir(dir.path())
        .env("HOME", "/home/expanded")
        .output()
        .unwrap();
    assert!(output.status.success(), "{command}: {output:?}");
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "the command created a file: {command}"
    );
    let out = String::from_utf8(output.stdout).unwrap();
    let mut words: Vec<String> = out.split('\0').map(str::to_owned).collect();
    assert_eq!(words.pop().as_deref(), Some(""));
    words
}

fn program_word(preset: &Preset) -> String {
    match preset.program {
        Program::Path(p) => p.to_owned(),
        Program::Ralph => shell_quote(&std::env::current_exe().unwrap().display().to_string()),
    }
}

fn extra() -> Vec<String> {
    vec!["--flag".to_owned(), NASTY.to_owned(), String::new()]
}

/// The flag a run's first lines name is the one the preset really passes: every coding
/// agent's "do not ask" flag is said, and only the demo has none.
#[test]
fn every_preset_s_unattended_flag_is_one_it_passes() {
    for preset in presets() {
        match preset.unattended {
            Some(u) => assert!(
                preset.args.contains(&Lit(u.flag)),
                "{}: {}",
                preset.name,
                u.flag
            ),
            None => assert_eq!(preset.program, Program::Ralph, "{}", preset.name),
        }
    }
}

#[test]
fn every_preset_quotes_everything_that_came_from_outside() {
    let file = PathBuf::from("/tmp/ralph test/.ralph/logs/iter-0001.prompt.md");
    for preset in presets() {
        let program = program_word(preset);
        let fresh = preset.fresh(NASTY, &file, &extra(), Some(NASTY));
        let words = words_seen(&fresh.command, &program);
        let want = preset.words(
            None,
            NASTY,
            &file,
            Options {
                extra_args: &extra(),
                model: Some(NASTY),
            },
        );
        assert_eq!(words, want[1..], "{}: {}", preset.name, fresh.command);
        if preset.name != "demo" {
            assert!(
                words.windows(3).any(|w| w == ["--flag", NASTY, ""]),
                "{}: extra args kept whole and in order: {words:?}",
                preset.name
            );
            assert!(
                words.iter().any(|w| w == NASTY),
                "{}: model passed",
                preset.name
            );
        }
        match preset.prompt {
            PromptVia::Stdin => {
                assert_eq!(fresh.stdin.as_deref(), Some(NASTY.as_bytes()));
            }
            PromptVia::Argv => {
                assert_eq!(fresh.stdin, None);
                assert_eq!(words.last().map(String::as_str), Some(NASTY));
            }
            PromptVia::StreamJson => {
                let line = String::from_utf8(fresh.stdin.clone().unwrap()).unwrap();
                let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                assert_eq!(
                    v["message"]["content"], NASTY,
                    "the prompt, whole, as a user message"
                );
                assert!(fresh.conversation, "stdin stays open for the host protocol");
            }
        }

        let resumed = preset.resume(NASTY, NASTY, &file, &extra(), Some(NASTY));
        assert_eq!(resumed.is_some(), preset.can_resume(), "{}", preset.name);
        if let Some(resumed) = resumed {
            let words = words_seen(&resumed.command, &program);
            assert!(
                words.iter().filter(|w| *w == NASTY).count() >= 2,
                "{}: session id and model each one word: {words:?}",
                preset.name
            );
        }
    }
}

#[test]
fn fresh_and_resume_commands_are_what_each_cli_expects() {
    let file = Path::new("/w/.ralph/logs/iter-0003.prompt.md");
    let args = vec!["--max-turns".to_owned(), "5".to_owned()];
    let cmd = |name: &str| {
        let p = find(name).unwrap();
        let fresh = p.fresh("Fix it", file, &args, Some("big")).command;
        let resume = p
            .resume("S-1", "Use Redis", file, &args, Some("big"))
            .map(|i| i.command);
        (fresh, resume)
    };
    assert_eq!(
        cmd("claude"),
        (
            "claude -p --output-format stream-json --verbose --dangerously-skip-permissions --model big --max-turns 5".into(),
            Some("claude -p --output-format stream-json --verbose --dangerously-skip-permissions --resume S-1 --model big --max-turns 5".into())
        )
    );
    assert_eq!(
        cmd("codex"),
        (
            "codex exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check --model big --max-turns 5 -".into(),
            Some("codex exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check --model big --max-turns 5 resume S-1 -".into())
        )
    );
    assert_eq!(
        cmd("cursor"),
        (
            "cursor-agent -p --output-format stream-json --trust --force --model big --max-turns 5 'Fix it'".into(),
            Some("cursor-agent -p --output-format stream-json --trust --force --resume S-1 --model big --max-turns 5 'Use Redis'".into())
        )
    );
    assert_eq!(
        cmd("gemini"),
        (
            "gemini -o stream-json --yolo --skip-trust --model big --max-turns 5 -p 'Follow the instructions above.'".into(),
            Some("gemini -o stream-json --yolo --skip-trust --resume S-1 --model big --max-turns 5 -p 'Follow the instructions above.'".into())
        )
    );
    assert_eq!(
        cmd("opencode"),
        (
            "opencode run --format json --auto --model big --max-turns 5".into(),
            Some(
                "opencode run --format json --auto --session S-1 --model big --max-turns 5".into()
            )
        )
    );
    assert_eq!(
        cmd("amp"),
        (
            "amp -x --stream-json --dangerously-allow-all --mode big --max-turns 5".into(),
            Some("amp threads continue S-1 -x --stream-json --dangerously-allow-all --mode big --max-turns 5".into())
        )
    );
    let (demo, demo_resume) = cmd("demo");
    assert!(demo.ends_with(" __demo-agent"), "{demo}");
    assert_eq!(demo_resume, None);
}

#[test]
fn stdin_presets_send_the_prompt_on_stdin_and_resume_sends_the_message() {
    let file = Path::new("p.md");
    for preset in presets().iter().filter(|p| p.prompt == PromptVia::Stdin) {
        let fresh = preset.fresh("the prompt", file, &[], None);
        assert_eq!(fresh.stdin.as_deref(), Some(&b"the prompt"[..]));
        assert!(!fresh.command.contains("the prompt"), "{}", preset.name);
        if let Some(resumed) = preset.resume("id", "the answer", file, &[], None) {
            assert_eq!(resumed.stdin.as_deref(), Some(&b"the answer"[..]));
        }
    }
}

/// Cursor takes the prompt only in argv: a long one would pass the kernel's limit on one
/// argument, so it points to the prompt file instead.
#[test]
fn cursor_points_to_the_prompt_file_when_the_prompt_is_long() {
    let cursor = find("cursor").unwrap();
    let file = Path::new("/w/.ralph/logs/it's.prompt.md");
    let long = "x".repeat(ARGV_PROMPT_MAX + 1);
    let run = cursor.fresh(&long, file, &[], None);
    assert!(run.command.len() < 1024, "{}", run.command);
    let words = words_seen(&run.command, "cursor-agent");
    assert_eq!(
        words.last().unwrap(),
        "Your instructions are in the file /w/.ralph/logs/it's.prompt.md: read all of it and follow it."
    );
    let flag_like = cursor.fresh("--help me", file, &[], None);
    let words = words_seen(&flag_like.command, "cursor-agent");
    assert_eq!(words.last().unwrap(), " --help me");
}

#[test]
fn claude_gets_is_sandbox_only_as_root() {
    let claude = find("claude").unwrap();
    let env = claude.fresh("p", Path::new("p"), &[], None).env;
    let want: Vec<(String, String)> = if running_as_root() {
        vec![("IS_SANDBOX".into(), "1".into())]
    } else {
        Vec::new()
    };
    assert_eq!(env, want);
    for other in presets().iter().filter(|p| !p.name.starts_with("claude")) {
        assert!(other.fresh("p", Path::new("p"), &[], None).env.is_empty());
    }
}

#[test]
fn presets_are_found_by_name_and_list_in_detection_order() {
    let names: Vec<&str> = presets().iter().map(|p| p.name).collect();
    assert_eq!(
        names,
        [
            "claude",
            "claude-sdk",
            "codex",
            "cursor",
            "gemini",
            "opencode",
            "amp",
            "demo"
        ]
    );
    assert_eq!(find("codex").unwrap().format(), StreamFormat::CodexJson);
    assert!(find("nope").is_none());
    let native: Vec<&str> = presets()
        .iter()
        .filter(|p| p.native_questions)
        .map(|p| p.name)
        .collect();
    assert_eq!(native, ["claude-sdk"]);
}

fn touch(dir: &Path, name: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, b"").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn detection_takes_the_first_installed_preset_in_order() {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let path = std::env::join_paths([a.as_path(), Path::new("/nonexistent"), b.as_path()]).unwrap();
    let detected = || detect(Some(&path)).map(|p| p.name);

    assert_eq!(detected(), None);
    assert_eq!(detect(None).map(|p| p.name), None);
    // Not executable, or not a file: not installed.
    touch(&a, "claude", 0o644);
    std::fs::create_dir(b.join("codex")).unwrap();
    assert_eq!(detected(), None);

    touch(&b, "amp", 0o755);
    assert_eq!(detected(), Some("amp"));
    touch(&a, "opencode", 0o755);
    assert_eq!(detected(), Some("opencode"));
    touch(&b, "gemini", 0o700);
    assert_eq!(detected(), Some("gemini"));
    touch(&a, "cursor-agent", 0o755);
    assert_eq!(detected(), Some("cursor"));
    touch(&b, "codex-cli", 0o755);
    assert_eq!(detected(), Some("cursor"));
    std::fs::remove_dir(b.join("codex")).unwrap();
    touch(&b, "codex", 0o755);
    assert_eq!(detected(), Some("codex"));
    touch(&b, "claude", 0o755);
    assert_eq!(detected(), Some("claude"));
    // The demo agent is built in: never "detected", whatever is on PATH.
    touch(&a, "demo", 0o755);
    touch(&a, "__demo-agent", 0o755);
    assert_eq!(detected(), Some("claude"));
}

#[test]
fn spec_builds_the_same_invocations() {
    let claude = find("claude").unwrap();
    let spec = claude.spec(vec!["--x".into()], Some("m".into()));
    assert_eq!(spec.name, "claude");
    assert_eq!(spec.format, StreamFormat::ClaudeStreamJson);
    let file = Path::new("f");
    assert_eq!(
        (spec.fresh)("p", file),
        claude.fresh("p", file, &["--x".into()], Some("m"))
    );
    let resume = spec.resume.as_ref().unwrap();
    assert_eq!(
        resume("s", "msg", file),
        claude
            .resume("s", "msg", file, &["--x".into()], Some("m"))
            .unwrap()
    );
    assert!(
        find("demo")
            .unwrap()
            .spec(Vec::new(), None)
            .resume
            .is_none()
    );
}
