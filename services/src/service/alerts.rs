//! The `alerts` service: the phone making itself noticed — the torch,
//! speech, vibration, and all of them at once to find the phone.
//!
//! These are companion-app actions at heart (an app has `CameraManager`,
//! `TextToSpeech` and `Vibrator`); over ADB only vibration has a shell
//! command (`docs/adb-commands.md`).

use super::*;

/// The longest text `alerts.speak` takes, in characters: about seven
/// seconds of speech at the normal rate, so that the answer (sent once the
/// text has been spoken) comes within the daemon's default request timeout
/// of ten seconds.
pub const SPEAK_MAX_CHARS: usize = 100;
/// How long `alerts.vibrate` vibrates unless told, in milliseconds (as
/// Termux's `termux-vibrate`).
pub const VIBRATE_DEFAULT_MS: u32 = 1_000;
/// The longest vibration `alerts.vibrate` asks for, in milliseconds.
pub const VIBRATE_MAX_MS: u32 = 5_000;
/// How long `alerts.find_my_phone` rings unless told, in seconds.
pub const FIND_DEFAULT_S: u8 = 30;

actions!(
    /// `alerts` actions.
    AlertsAction {
        Torch = "torch" (Low, changes) "Turn the torch (the camera's flash light) on or off." {
            /// Whether the torch should be on.
            on: bool,
        }
        -> TorchState
        example(Self::Torch { on: true }),
        Speak = "speak" (Medium, changes)
            "Say a short text aloud with the phone's text-to-speech, at the media volume; answers once it has been spoken."
        {
            /// The text.
            text: String = text_param("the text to say", SPEAK_MAX_CHARS),
        }
        -> Spoken
        example(Self::Speak { text: "Dinner is ready".into() }),
        Vibrate = "vibrate" (Low, changes) "Vibrate the phone, also in silent or Do Not Disturb mode." {
            /// Milliseconds.
            ms: Option<u32> = Schema::integer("duration in ms (default 1000)", Some(10), Some(i64::from(VIBRATE_MAX_MS))),
        }
        -> Vibrated
        example(Self::Vibrate { ms: Some(500) }),
        FindMyPhone = "find_my_phone" (Low, changes)
            "Help find the phone: for `seconds` it says \"Here I am\" on the alarm stream at full volume, vibrates and lights the torch, then restores the volume and turns the torch off. Answers at once."
        {
            /// Seconds.
            seconds: Option<u8> = Schema::integer("how long, in seconds (default 30)", Some(5), Some(60)),
        }
        -> FindingPhone
        example(Self::FindMyPhone { seconds: Some(30) }),
    }
);

records! {
    /// What `alerts.torch` answers.
    TorchState {
        /// Whether the torch is now on.
        torch: bool,
    }

    /// What `alerts.speak` answers.
    Spoken {
        /// The length of the text spoken, in characters.
        length: u64,
    }

    /// What `alerts.vibrate` answers.
    Vibrated {
        /// The vibration's duration, in milliseconds.
        ms: u32,
    }

    /// What `alerts.find_my_phone` answers, as the ringing starts.
    FindingPhone {
        /// How long it rings, in seconds.
        seconds: u8,
        /// When it stops and the volume and torch are restored (Unix epoch ms).
        until_ms: u64,
    }
}

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "phoneAlerts",
        id: "alerts",
        description: "Torch, speech, vibration, and ringing to find the phone.",
        actions: AlertsAction::specs(),
        state: None,
        // No Home Assistant entity yet (a "Find my phone" button would fit).
        home_assistant: Vec::new(),
        companion_event: None,
    }
}
