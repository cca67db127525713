use super::*;

fn doc(front: &str, body: &str) -> String {
    format!("---\n{front}\n---\n{body}\n")
}

#[test]
fn builtin_skills_all_load_and_resolve() {
    let set = SkillSet::builtin();
    assert!(set.problems().is_empty(), "{:?}", set.problems());
    let names: Vec<&str> = set.all().map(|s| s.name.as_str()).collect();
    for want in [
        "bedtime",
        "find-my-phone",
        "phone-health-report",
        "leave-home",
        "quiet-hours",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for s in set.all() {
        let allowed = s
            .resolve_tools()
            .unwrap_or_else(|e| panic!("{}: unknown tools {e:?}", s.name));
        assert!(
            !allowed.services.is_empty(),
            "{} has no device tools",
            s.name
        );
        assert!(s.enabled);
    }
    // Read-only report: low; bedtime declares medium.
    let report = set.get("phone-health-report").unwrap();
    assert_eq!(report.risk(&report.resolve_tools().unwrap()), Risk::Low);
    // Wi-Fi must never be turned off by bedtime: only its status is allowed.
    let bedtime = set.get("bedtime").unwrap().resolve_tools().unwrap();
    assert!(bedtime.allows("wifi_automation", "status"));
    assert!(!bedtime.allows("wifi_automation", "disable"));
}

#[test]
fn parse_errors_name_the_problem() {
    // Front matter over the body "b".
    let front = |matter: &str| doc(matter, "b");
    for (dir, text, want) in [
        ("a", "no front matter".to_owned(), "must start with"),
        ("a", "---\nname: a\n".to_owned(), "not closed"),
        (
            "a",
            front("name: a\ndescription: x\nallowed-tool: battery"),
            "allowed-tool",
        ),
        ("a", front("name: b\ndescription: x"), "directory name"),
        ("../x", front("name: ../x\ndescription: x"), "lowercase"),
        ("a", front("name: a\ndescription: \"\""), "description"),
        ("a", doc("name: a\ndescription: x", ""), "empty"),
        (
            "a",
            front("name: a\ndescription: x\nrisk: extreme"),
            "front matter",
        ),
        (
            "a",
            front("name: a\ndescription: x\nmax_iterations: 0"),
            "max_iterations",
        ),
        (
            "a",
            front("name: a\ndescription: x\ntimeout_s: -1"),
            "timeout_s",
        ),
        (
            "a",
            front("name: a\ndescription: x\nparameters: {type: string}"),
            "parameters",
        ),
        (
            "a",
            front("name: a\ndescription: [unclosed"),
            "front matter",
        ),
    ] {
        let err = Skill::parse(dir, &text, SkillSource::Builtin).unwrap_err();
        assert!(err.contains(want), "{dir}: {err:?} should contain {want:?}");
    }
}

#[test]
fn a_full_skill_parses() {
    let text = doc(
        "name: lights-out\ndescription: Dim.\nallowed-tools: screen_control.set_brightness battery current_time\nrisk: high\nmax-iterations: 3\ntimeout_s: 9.5\nlicense: MIT\nmetadata: {author: me, n: 2}\nparameters:\n  type: object\n  required: [level]\n  additionalProperties: false\n  properties:\n    level: {type: integer}",
        "Do it.",
    );
    let s = Skill::parse("lights-out", &text, SkillSource::Builtin).unwrap();
    assert_eq!(s.allowed_tools.len(), 3);
    assert_eq!(s.risk, Some(Risk::High));
    assert_eq!(s.max_iterations, Some(3));
    assert_eq!(s.timeout, Some(Duration::from_secs_f64(9.5)));
    assert_eq!(s.metadata["n"], json!(2));
    assert_eq!(s.body, "Do it.");
    let a = s.resolve_tools().unwrap();
    assert!(a.allows("screen_control", "set_brightness"));
    assert!(!a.allows("screen_control", "status"));
    assert!(a.allows("battery", "status"));
    assert!(a.current_time && !a.calculator && !a.invoke_skill);
    assert_eq!(s.check_input(&json!({"level": 3})), Ok(()));
    assert!(
        s.check_input(&json!({}))
            .unwrap_err()
            .contains("input.level")
    );
    assert!(
        s.check_input(&json!({"level": "x"}))
            .unwrap_err()
            .contains("integer")
    );
    assert!(
        s.check_input(&json!({"level": 1, "x": 1}))
            .unwrap_err()
            .contains("input.x")
    );
    assert!(s.check_input(&json!([1])).unwrap_err().contains("object"));
}

#[test]
fn unknown_tools_are_listed() {
    let err = AllowedTools::resolve(&[
        "battery.status".into(),
        "battery.explode".into(),
        "teleport".into(),
        "wifiAutomation.*".into(),
    ])
    .unwrap_err();
    assert_eq!(
        err,
        vec!["battery.explode".to_owned(), "teleport".to_owned()]
    );
    let ok = AllowedTools::resolve(&["wifiAutomation.*".into()]).unwrap();
    assert!(ok.allows("wifi_automation", "disable"));
    assert_eq!(ok.max_risk(), Risk::High);
    assert_eq!(AllowedTools::default().max_risk(), Risk::Low);
}

#[test]
fn loader_overrides_builtins_and_skips_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        std::fs::create_dir_all(dir.path().join(name)).unwrap();
        std::fs::write(dir.path().join(name).join("SKILL.md"), text).unwrap();
    };
    write(
        "bedtime",
        &doc(
            "name: bedtime\ndescription: My own bedtime.\nallowed-tools: battery",
            "Mine.",
        ),
    );
    write("broken", "---\nname: broken\n");
    write("Bad_Name", &doc("name: Bad_Name\ndescription: x", "b"));
    write(
        "huge",
        &format!(
            "{}{}",
            doc("name: huge\ndescription: x", ""),
            "x".repeat(10 << 20)
        ),
    );
    write(
        "with-refs",
        &doc(
            "name: with-refs\ndescription: Has references.",
            "Read notes.md.",
        ),
    );
    std::fs::create_dir_all(dir.path().join("with-refs/references")).unwrap();
    std::fs::write(dir.path().join("with-refs/references/notes.md"), "hello").unwrap();
    std::fs::create_dir_all(dir.path().join("no-file")).unwrap();

    let set = SkillSet::load(
        &[dir.path().to_owned(), dir.path().join("missing")],
        &["*".into()],
    );
    let bedtime = set.get("bedtime").unwrap();
    assert_eq!(bedtime.description, "My own bedtime.");
    assert!(matches!(bedtime.source, SkillSource::File(_)));
    let reasons: Vec<String> = set
        .problems()
        .iter()
        .map(|p| format!("{}: {}", p.path.display(), p.reason))
        .collect();
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("broken/SKILL.md") && r.contains("not closed"))
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("Bad_Name") && r.contains("not a valid"))
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("huge/SKILL.md") && r.contains("limit"))
    );
    assert!(reasons.iter().any(|r| r.contains("no-file/SKILL.md")));
    assert!(set.get("broken").is_none() && set.get("huge").is_none());

    let r = set.reference_path("with-refs", "notes.md").unwrap();
    assert_eq!(std::fs::read_to_string(r).unwrap(), "hello");
    assert!(
        set.reference_path("with-refs", "../SKILL.md")
            .unwrap_err()
            .contains("no reference")
    );
    assert!(set.read("bedtime").unwrap()["instructions"] == "Mine.");
    assert!(set.read("nope").unwrap_err().contains("unknown skill"));
}

#[test]
fn enabled_list_and_registry_prompt() {
    let set = SkillSet::load(&[], &["bedtime".into()]);
    assert_eq!(set.enabled().count(), 1);
    assert!(
        set.enabled_skill("find-my-phone")
            .unwrap_err()
            .contains("not enabled")
    );
    let prompt = set.registry_prompt();
    assert!(prompt.starts_with("## Available skills"));
    // A brief description: the first clause and when to use it.
    assert!(
        prompt.contains(
            "- bedtime: Get a phone ready for the night. Use when the user says they are going to bed."
        ),
        "{prompt}"
    );
    assert!(!prompt.contains("find-my-phone"));
    // Progressive disclosure: the body is not in the registry.
    assert!(!prompt.contains("Never turn Wi-Fi off"));
}
