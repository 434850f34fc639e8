import { definePack } from '@mtg/tool-kit';
import { acmeConfig } from './config.ts';
import { quotePrice } from './quote-price.ts';
import { syncInvoices } from './sync-invoices.ts';
import { voidInvoices } from './void-invoices.ts';

export default definePack({
  name: '@acme/tools',
  version: '1.0.0',
  config: acmeConfig,
  targets: ['crm', 'ledger'],
  tools: (config) => [quotePrice(config), syncInvoices(config), voidInvoices(config)],
});
