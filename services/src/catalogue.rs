//! The catalogue itself: every service, its actions, their parameter and
//! result schemas, risk levels and descriptions written for a language model.

use crate::Command;
use crate::error::CatalogueError;
use crate::home_assistant::HaEntity;
use crate::schema::{Property, Schema, ViolationKind};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::LazyLock;

pub(crate) use crate::names::PACKAGE_PATTERN;
/// An activity: `.Main`, `Main` or a fully qualified class name (inner classes with `$`).
pub(crate) const ACTIVITY_PATTERN: &str =
    r"^\.?[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)*$";
/// http or https only, and only the printable ASCII characters RFC 3986
/// allows in a URL (unreserved, reserved and `%` for percent-encoding),
/// except the quote `'`. Everything else — whitespace, quotes, backslashes,
/// C0 and C1 control characters, and every non-ASCII character, among them
/// Unicode format characters such as U+202E (right-to-left override),
/// U+200B (zero width space) and U+FEFF — is refused by construction: a
/// list of characters allowed cannot forget one that is dangerous.
/// Non-ASCII text in a URL must be percent-encoded, as RFC 3986 requires.
pub(crate) const URL_PATTERN: &str =
    r"^https?://[A-Za-z0-9.\-]+(:[0-9]{1,5})?(/[A-Za-z0-9\-._~:/?#\[\]@!$&()*+,;=%]*)?$";
pub(crate) const FILENAME_PATTERN: &str = r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$";

/// How much harm an action can do; approval policy is expressed in these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Reads, or harmless and easily undone (media keys, volume, brightness).
    Low,
    /// Noticeable or privacy-relevant (launching apps, location, toggling Bluetooth).
    Medium,
    /// Can cut the phone off or capture private data (Wi-Fi off, airplane mode, camera).
    High,
    /// Can do anything the phone's shell user can (`shell.run`): always
    /// waits for a person's approval, whatever the agent's threshold or
    /// allow list says.
    Critical,
}

impl Risk {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Critical => "critical",
        }
    }
}

/// One parameter of an action.
#[derive(Debug, Clone)]
pub struct ParamSpec {
    /// The parameter name.
    pub name: &'static str,
    /// Whether it must be given.
    pub required: bool,
    /// Its schema, with description and bounds.
    pub schema: Schema,
}

/// One action of a service.
#[derive(Debug, Clone)]
pub struct ActionSpec {
    /// The action name, snake_case.
    pub name: &'static str,
    /// One line for a language model: what it does and what it returns.
    pub description: &'static str,
    /// How much harm it can do.
    pub risk: Risk,
    /// Whether it changes the device's state.
    pub mutates: bool,
    /// Its parameters.
    pub params: Vec<ParamSpec>,
    /// The shape of a successful result.
    pub result: Schema,
    /// An example of valid parameters.
    pub example: Value,
}

impl ActionSpec {
    /// The parameters as one JSON object schema.
    pub fn params_schema(&self) -> Schema {
        Schema::object(
            "",
            self.params
                .iter()
                .map(|p| Property {
                    name: p.name,
                    required: p.required,
                    schema: p.schema.clone(),
                })
                .collect(),
        )
    }

    /// A JSON description: name, description, risk, mutates, parameter and
    /// result schemas.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "risk": self.risk,
            "mutates": self.mutates,
            "params": self.params_schema().to_json(),
            "result": self.result.to_json(),
            "example": self.example,
        })
    }
}

/// One service: an Android capability.
#[derive(Debug, Clone)]
pub struct ServiceSpec {
    /// camelCase node type, e.g. `batteryMonitor`.
    pub node_type: &'static str,
    /// snake_case service id, e.g. `battery`.
    pub id: &'static str,
    /// One line for people and language models.
    pub description: &'static str,
    /// The service's actions.
    pub actions: Vec<ActionSpec>,
    /// The read that gives the service's state (published on its state
    /// topic, polled, refreshed after a change); `None` for a service
    /// without a state worth keeping (app lists, sensors read on demand).
    pub state: Option<fn() -> Command>,
    /// Its Home Assistant entities.
    pub home_assistant: Vec<HaEntity>,
    /// The companion event (`companion/<id>/event/<name>`) whose body is
    /// this service's state, if the companion app pushes one.
    pub companion_event: Option<&'static str>,
}

impl ServiceSpec {
    /// The action of that name, if any.
    pub fn action(&self, name: &str) -> Option<&ActionSpec> {
        self.actions.iter().find(|a| a.name == name)
    }

    /// The highest risk among the service's actions.
    pub fn max_risk(&self) -> Risk {
        self.actions
            .iter()
            .map(|a| a.risk)
            .max()
            .unwrap_or(Risk::Low)
    }

    /// A JSON description of the service, all its actions, its state read,
    /// Home Assistant entities and companion event.
    pub fn to_json(&self) -> Value {
        json!({
            "service_id": self.id,
            "node_type": self.node_type,
            "description": self.description,
            "actions": self.actions.iter().map(ActionSpec::to_json).collect::<Vec<_>>(),
            "state": self.state.map(|read| {
                let read = read();
                json!({ "action": read.action_name(), "params": read.params_json() })
            }),
            "home_assistant": self.home_assistant.iter().map(|e| json!({
                "object_id": e.object_id,
                "component": e.kind.component(),
                "name": e.name,
            })).collect::<Vec<_>>(),
            "companion_event": self.companion_event,
        })
    }
}

/// The catalogue of every service. Obtain it with [`Catalogue::get`].
#[derive(Debug)]
pub struct Catalogue {
    services: Vec<ServiceSpec>,
}

static CATALOGUE: LazyLock<Catalogue> = LazyLock::new(|| Catalogue {
    services: crate::service::all(),
});

impl Catalogue {
    /// The catalogue (built once, on first use).
    pub fn get() -> &'static Catalogue {
        &CATALOGUE
    }

    /// Every service, in catalogue order.
    pub fn services(&self) -> &[ServiceSpec] {
        &self.services
    }

    /// Look a service up by service id (`wifi_automation`) or node type
    /// (`wifiAutomation`).
    ///
    /// # Errors
    /// [`CatalogueError::UnknownService`] listing every valid name.
    pub fn service(&self, name: &str) -> Result<&ServiceSpec, CatalogueError> {
        self.services
            .iter()
            .find(|s| s.id == name || s.node_type == name)
            .ok_or_else(|| CatalogueError::UnknownService {
                given: name.chars().take(80).collect(),
                valid: self
                    .services
                    .iter()
                    .map(|s| format!("{} ({})", s.id, s.node_type))
                    .collect(),
            })
    }

    /// Look up an action of a service.
    ///
    /// # Errors
    /// Unknown service or unknown action, each listing the valid names.
    pub fn action(
        &self,
        service: &str,
        action: &str,
    ) -> Result<(&ServiceSpec, &ActionSpec), CatalogueError> {
        let spec = self.service(service)?;
        let action_spec = spec
            .action(action)
            .ok_or_else(|| CatalogueError::UnknownAction {
                service: spec.id.to_owned(),
                given: action.chars().take(80).collect(),
                valid: spec.actions.iter().map(|a| a.name.to_owned()).collect(),
            })?;
        Ok((spec, action_spec))
    }

    /// Turn untrusted input into a typed [`Command`]. `params` may be `null`
    /// (no parameters) or an object.
    ///
    /// # Errors
    /// Unknown service or action; parameters that are not an object, unknown,
    /// missing, of the wrong type or out of bounds — each naming the parameter.
    pub fn parse(
        &self,
        service: &str,
        action: &str,
        params: &Value,
    ) -> Result<Command, CatalogueError> {
        let (spec, action_spec) = self.action(service, action)?;
        let empty = Value::Object(Default::default());
        let params = if params.is_null() { &empty } else { params };
        let err_ctx = |param: String, reason: String, kind: ViolationKind| match kind {
            ViolationKind::Unknown => CatalogueError::UnknownParameter {
                service: spec.id.to_owned(),
                action: action_spec.name.to_owned(),
                param,
                valid: action_spec
                    .params
                    .iter()
                    .map(|p| p.name.to_owned())
                    .collect(),
            },
            ViolationKind::Missing => CatalogueError::MissingParameter {
                service: spec.id.to_owned(),
                action: action_spec.name.to_owned(),
                param,
            },
            ViolationKind::Invalid => CatalogueError::InvalidParameter {
                service: spec.id.to_owned(),
                action: action_spec.name.to_owned(),
                param,
                reason,
            },
        };
        if !params.is_object() {
            return Err(CatalogueError::ParamsNotObject {
                service: spec.id.to_owned(),
                action: action_spec.name.to_owned(),
                got: crate::schema::json_type(params),
            });
        }
        action_spec
            .params_schema()
            .validate(params)
            .map_err(|v| err_ctx(v.path, v.reason, v.kind))?;
        let tagged = if action_spec.params.is_empty() {
            json!({ "action": action_spec.name })
        } else {
            json!({ "action": action_spec.name, "params": params })
        };
        let position = self
            .services
            .iter()
            .position(|s| std::ptr::eq(s, spec))
            .unwrap_or(usize::MAX);
        Command::from_validated(position, tagged)
            .map_err(|e| err_ctx(String::new(), e.to_string(), ViolationKind::Invalid))
    }
}
