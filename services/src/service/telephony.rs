//! The `telephony` service: text messages and calls, to allowed numbers.

use super::*;

actions!(
    /// `telephony` actions.
    TelephonyAction {
        SmsSend = "sms_send" (High, changes)
            "Open the phone's messaging app with a text message to an allowed number, ready to send (Android lets no shell command send it silently)."
        {
            /// The recipient's number.
            number: String = phone_number_param(),
            /// The message.
            text: String = text_param("the message", 1600),
        }
        -> SmsComposed
        example(Self::SmsSend { number: "+4915112345678".into(), text: "On my way".into() }),
        Dial = "dial" (High, changes) "Call an allowed number at once." {
            /// The number to call.
            number: String = phone_number_param(),
        }
        -> CallPlaced
        example(Self::Dial { number: "+4915112345678".into() }),
    }
);

records! {
    /// What `telephony.sms_send` answers.
    SmsComposed {
        /// The recipient's number, as given.
        number: String,
        /// `composed`: the message waits in the messaging app (ADB);
        /// `sent`: handed to Android to send (the Termux companion).
        status: String,
    }

    /// What `telephony.dial` answers.
    CallPlaced {
        /// The number called, as given.
        number: String,
        /// Whether the call was started (always `true`: a failure is an error).
        calling: bool,
    }
}

pub(super) fn spec() -> ServiceSpec {
    ServiceSpec {
        node_type: "telephony",
        id: "telephony",
        description: "Text messages and phone calls, to the numbers the daemon allows. Off unless enabled in the daemon's configuration.",
        actions: TelephonyAction::specs(),
        state: None,
        home_assistant: Vec::new(),
        companion_event: None,
    }
}

fn phone_number_param() -> Schema {
    Schema::pattern(
        "phone number: digits with an optional leading +, e.g. +4915112345678",
        PHONE_NUMBER_PATTERN,
        21,
    )
}
