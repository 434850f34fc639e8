export { buildGateway, ADMIN_SCOPES, type Gateway } from './build-gateway.ts';
export { gatewayConfigSchema, type GatewayConfig } from './config.ts';
