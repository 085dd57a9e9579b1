//! Endpoint selection from a token's catalog (pure).

use super::auth::CatalogService;

/// Why no single endpoint could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// No catalog entry has this service type: the service is not deployed
    /// (or not registered in Keystone). For Nova and Octavia this is a
    /// normal cloud shape, not a failure.
    #[error("service type {service_type:?} is not in the token's catalog")]
    NotInCatalog {
        /// The service type looked up, e.g. `load-balancer`.
        service_type: String,
    },
    /// The service is in the catalog but has no endpoint with the configured
    /// interface in the configured region (or in any region, when none is
    /// configured): usually a wrong `interface` or `region_name`.
    #[error(
        "service {service_type:?} has no {interface:?} endpoint {} (endpoints: {})",
        in_region(region.as_deref()),
        listing(available)
    )]
    NoEndpoint {
        /// The service type looked up.
        service_type: String,
        /// The configured interface (`public`, `internal` or `admin`).
        interface: String,
        /// The configured region; `None` means any region would have done.
        region: Option<String>,
        /// What the catalog does offer for this service, as
        /// `interface@region` (empty region when the endpoint names none),
        /// so the message shows what to configure instead.
        available: Vec<String>,
    },
    /// No region is configured and the interface has endpoints in more than
    /// one region: picking one would be a guess.
    #[error(
        "service {service_type:?} has {interface:?} endpoints in several regions ({}): set region_name",
        listing(regions)
    )]
    Ambiguous {
        /// The service type looked up.
        service_type: String,
        /// The configured interface.
        interface: String,
        /// The regions offering that interface, sorted and deduplicated.
        regions: Vec<String>,
    },
}

/// `in region RegionTwo`, or `in any region` when none is configured.
fn in_region(region: Option<&str>) -> String {
    region.map_or_else(|| "in any region".to_owned(), |r| format!("in region {r}"))
}

/// `a, b, c`, or `none` for an empty list.
fn listing(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

/// Picks the URL of `service_type` for `interface` and (optionally) region.
///
/// Without a configured region, endpoints in more than one region are an
/// error rather than a guess: silently metering against another region's
/// Neutron would attribute every byte wrongly.
pub(crate) fn select(
    catalog: &[CatalogService],
    service_type: &str,
    interface: &str,
    region: Option<&str>,
) -> Result<String, CatalogError> {
    let services: Vec<_> = catalog
        .iter()
        .filter(|s| s.service_type == service_type)
        .collect();
    if services.is_empty() {
        return Err(CatalogError::NotInCatalog {
            service_type: service_type.to_owned(),
        });
    }
    let endpoints = services.iter().flat_map(|s| s.endpoints.iter());
    let region_of =
        |e: &super::auth::CatalogEndpoint| e.region_id.clone().or_else(|| e.region.clone());
    let matching: Vec<_> = endpoints
        .clone()
        .filter(|e| e.interface == interface)
        .filter(|e| match region {
            None => true,
            Some(r) => e.region_id.as_deref() == Some(r) || e.region.as_deref() == Some(r),
        })
        .collect();
    let Some(first) = matching.first() else {
        return Err(CatalogError::NoEndpoint {
            service_type: service_type.to_owned(),
            interface: interface.to_owned(),
            region: region.map(str::to_owned),
            available: endpoints
                .map(|e| format!("{}@{}", e.interface, region_of(e).unwrap_or_default()))
                .collect(),
        });
    };
    let mut regions: Vec<String> = matching.iter().filter_map(|e| region_of(e)).collect();
    regions.sort();
    regions.dedup();
    if region.is_none() && regions.len() > 1 {
        return Err(CatalogError::Ambiguous {
            service_type: service_type.to_owned(),
            interface: interface.to_owned(),
            regions,
        });
    }
    Ok(first.url.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::auth::CatalogEndpoint;

    fn ep(
        interface: &str,
        url: &str,
        region_id: Option<&str>,
        region: Option<&str>,
    ) -> CatalogEndpoint {
        CatalogEndpoint {
            interface: interface.into(),
            url: url.into(),
            region_id: region_id.map(Into::into),
            region: region.map(Into::into),
        }
    }

    fn catalog() -> Vec<CatalogService> {
        vec![CatalogService {
            service_type: "network".into(),
            endpoints: vec![
                ep("public", "https://pub-one", Some("One"), Some("One")),
                ep("internal", "http://int-one", Some("One"), None),
                ep("internal", "http://int-two", None, Some("Two")),
            ],
        }]
    }

    #[test]
    fn region_matches_region_id_or_region() {
        assert_eq!(
            select(&catalog(), "network", "internal", Some("One")).unwrap(),
            "http://int-one"
        );
        assert_eq!(
            select(&catalog(), "network", "internal", Some("Two")).unwrap(),
            "http://int-two"
        );
        assert_eq!(
            select(&catalog(), "network", "public", Some("One")).unwrap(),
            "https://pub-one"
        );
    }

    #[test]
    fn several_regions_without_a_choice_is_an_error() {
        let err = select(&catalog(), "network", "internal", None).unwrap_err();
        assert_eq!(
            err,
            CatalogError::Ambiguous {
                service_type: "network".into(),
                interface: "internal".into(),
                regions: vec!["One".into(), "Two".into()],
            }
        );
        assert_eq!(
            select(&catalog(), "network", "public", None).unwrap(),
            "https://pub-one"
        );
    }

    #[test]
    fn missing_service_and_interface_are_distinguished() {
        assert!(matches!(
            select(&catalog(), "load-balancer", "internal", None),
            Err(CatalogError::NotInCatalog { .. })
        ));
        assert!(matches!(
            select(&catalog(), "network", "admin", Some("One")),
            Err(CatalogError::NoEndpoint { .. })
        ));
    }

    #[test]
    fn messages_show_regions_plainly() {
        let err = select(&catalog(), "network", "internal", Some("Three")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "service \"network\" has no \"internal\" endpoint in region Three \
             (endpoints: public@One, internal@One, internal@Two)"
        );
        let err = select(&catalog(), "network", "admin", None).unwrap_err();
        assert!(
            err.to_string().contains("endpoint in any region ("),
            "{err}"
        );
        let err = select(&catalog(), "network", "internal", None).unwrap_err();
        assert!(
            err.to_string().contains("several regions (One, Two)"),
            "{err}"
        );
    }
}
